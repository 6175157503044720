"""The teacher interface: writes the reasoning trace R*_t that explains one real transition.

The paper has a strong LLM explain each real transition; offline we use rule-based teachers that read
privileged env information (the hidden goal, which results match, why the reward is what it is).
Teachers are called at collection time with the transition and the env's ``info`` dict for that step
(:attr:`dreamgym.envs.base.TextStep.info`); an LLM teacher may ignore ``info`` and read only the text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from dreamgym._imports import resolve
from dreamgym.schema import Transition

__all__ = ["Teacher", "register_teacher", "get_teacher"]


class Teacher(ABC):
    """Writes a short, faithful rationale for why ``action`` in ``state`` leads to ``next_state``."""

    @abstractmethod
    def explain(self, transition: Transition, info: dict[str, Any]) -> str:
        """Return the rationale for ``transition``; ``info`` is the env's privileged step info."""


_TEACHERS: dict[str, str] = {}


def register_teacher(env_name: str, factory: str) -> None:
    """Register the rule-based teacher of ``env_name`` as ``"module:Class"``."""
    _TEACHERS[env_name] = factory


def get_teacher(env_name: str, **kwargs: Any) -> Teacher:
    """The rule-based teacher for ``env_name``."""
    if env_name not in _TEACHERS:
        raise KeyError(f"no teacher registered for env {env_name!r}; known: {sorted(_TEACHERS)}")
    return resolve(_TEACHERS[env_name])(**kwargs)


register_teacher("webshop", "dreamgym.teachers.webshop:WebShopTeacher")
register_teacher("alfworld", "dreamgym.teachers.alfworld:ALFWorldTeacher")
register_teacher("web", "dreamgym.teachers.web:WebTeacher")
