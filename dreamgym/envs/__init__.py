"""Text environments sharing one key layout (:class:`TextEnvBase`) and one registry (:func:`make_env`).

Env classes are imported lazily (``from dreamgym.envs import WebShopEnv`` loads only WebShop), so
importing this package never pulls in another env's optional dependencies; which classes there are is
read off the registry (:mod:`dreamgym.envs.registry`, the one table of envs).
"""

from __future__ import annotations

from typing import Any

from dreamgym._imports import resolve
from dreamgym.envs.alfworld.judging import alfworld_step_view
from dreamgym.envs.base import TextEnvBase
from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.envs.registry import exported_env_classes, make_env, register_env, registered_envs
from dreamgym.envs.webshop.checks import webshop_page_summary
from dreamgym.modeling.judge import register_page_view

# the reward judge's view of a step: a WebShop page's facts; an ALFWorld episode's decisive commands
register_page_view("webshop", lambda instruction, state, history: webshop_page_summary(instruction, state))
register_page_view("alfworld", alfworld_step_view)

__all__ = [
    "TextEnvBase", "EnvFactory", "SyntheticEnvFactory", "make_env", "register_env", "registered_envs",
    *exported_env_classes(),  # WebShopEnv, ALFWorldEnv, WebEnv, SyntheticEnv, ...: the registry's, lazily
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """An env class of the registry (:func:`~dreamgym.envs.registry.exported_env_classes`), imported now."""
    target = exported_env_classes().get(name)
    if target is None:
        raise AttributeError(f"module 'dreamgym.envs' has no attribute {name!r}")
    return resolve(target)
