"""Rationale writers (the paper's teacher R*): one interface, one rule-based teacher per env."""

from dreamgym.teachers.base import Teacher, get_teacher, register_teacher

__all__ = ["Teacher", "get_teacher", "register_teacher"]
