"""Env registry: ``make_env("webshop", batch_size=[4])``. Every registered env runs ``check_env_specs``
in ``tests/test_env_registry.py`` (parametrised over :func:`registered_envs`), so none can skip it.

An entry maps a name to a factory (a class or a function). Factories are given as import strings so
that importing the registry does not import heavy optional dependencies (TextWorld for ALFWorld).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from dreamgym._imports import resolve

__all__ = ["register_env", "make_env", "registered_envs"]

_REGISTRY: dict[str, str | Callable[..., Any]] = {}


def register_env(name: str, factory: str | Callable[..., Any]) -> None:
    """Register ``factory`` (a callable or ``"module:attr"``) under ``name``."""
    _REGISTRY[name] = factory


def registered_envs() -> list[str]:
    """Names of all registered envs, sorted."""
    return sorted(_REGISTRY)


def make_env(name: str, **kwargs: Any):
    """Build the env registered as ``name`` with ``kwargs``.

    Raises:
        KeyError: naming the unknown env and listing the registered ones.
        ValueError: for a keyword the env's constructor does not take, naming it and listing those it does.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown env {name!r}; registered envs are {registered_envs()}")
    cls = resolve(_REGISTRY[name])
    init = cls.__init__ if isinstance(cls, type) else cls  # a metaclass __call__ hides a class's own
    params = {k: v for k, v in inspect.signature(init).parameters.items() if k != "self"}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(set(kwargs) - set(params)) if not takes_any else []
    if unknown:
        raise ValueError(f"env {name!r} takes no argument(s) {unknown}; its arguments are {sorted(params)}")
    return cls(**kwargs)


# Built-in envs. Later modules join here, one line each.
register_env("webshop", "dreamgym.envs.webshop.env:WebShopEnv")
register_env("alfworld", "dreamgym.envs.alfworld.env:ALFWorldEnv")
register_env("web", "dreamgym.envs.web.env:WebEnv")  # needs chromium + chromedriver (apt) and miniwob
register_env("synthetic", "dreamgym.envs.synthetic:SyntheticEnv")
register_env("agentgym_webshop", "dreamgym.serve.client:WebShopHTTPEnv")  # needs url= of a server
register_env("agentgym_alfworld", "dreamgym.serve.client:ALFWorldHTTPEnv")
# learning checks (scripts/learning_check.py)
register_env("probe_choice", "dreamgym.envs.probes:ChoiceProbeEnv")
register_env("probe_credit", "dreamgym.envs.probes:CreditProbeEnv")
