"""Lazy factories for the registries (envs, experts, teachers): ``"module:attr"`` strings."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["resolve"]


def resolve(factory: str | Callable[..., Any]) -> Callable[..., Any]:
    """Return ``factory`` itself, or the attribute a ``"module:attr"`` string names (imported now)."""
    if not isinstance(factory, str):
        return factory
    module, sep, attr = factory.partition(":")
    if not sep:
        raise ValueError(f"factory {factory!r} must be a callable or a 'module:attr' string")
    return getattr(importlib.import_module(module), attr)
