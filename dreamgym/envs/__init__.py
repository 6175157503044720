"""Text environments sharing one key layout (:class:`TextEnvBase`) and one registry (:func:`make_env`).

Env classes are imported lazily (``from dreamgym.envs import WebShopEnv`` loads only WebShop), so
importing this package never pulls in another env's optional dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

from dreamgym.envs.base import TextEnvBase
from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.envs.registry import make_env, register_env, registered_envs
from dreamgym.envs.webshop.checks import webshop_page_summary
from dreamgym.modeling.judge import register_page_view

register_page_view("webshop", webshop_page_summary)  # the reward judge's view of a WebShop page

__all__ = [
    "TextEnvBase", "WebShopEnv", "ALFWorldEnv", "SyntheticEnv", "WebEnv", "EnvFactory", "SyntheticEnvFactory",
    "make_env", "register_env", "registered_envs",
]  # fmt: skip

_LAZY = {
    "WebShopEnv": "dreamgym.envs.webshop.env",
    "ALFWorldEnv": "dreamgym.envs.alfworld.env",
    "SyntheticEnv": "dreamgym.envs.synthetic",
    "WebEnv": "dreamgym.envs.web.env",
}
"""Lazily exported env classes: name -> module. Other envs add one line here."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dreamgym.envs' has no attribute {name!r}")
