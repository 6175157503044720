"""Env registry, THE table of env names: ``make_env("webshop", batch_size=[4])``. Every registered env
runs ``check_env_specs`` in ``tests/test_env_registry.py`` (parametrised over :func:`registered_envs`),
so none can skip it.

An entry maps a name to a factory (a class or a function). Factories are given as import strings so
that importing the registry does not import heavy optional dependencies (TextWorld for ALFWorld). What
else names envs reads this table: the envs a synthetic env may imitate (:func:`imitable_envs`,
``SyntheticEnv(real_env=...)``) and the env classes ``dreamgym.envs`` exports lazily
(:func:`exported_env_classes`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dreamgym._imports import resolve

__all__ = [
    "register_env",
    "make_env",
    "registered_envs",
    "env_factory",
    "imitable_envs",
    "exported_env_classes",
]


@dataclass(frozen=True)
class _Entry:
    factory: str | Callable[..., Any]  # a callable, or "module:attr" imported on first use
    imitable: bool  # a synthetic env may imitate it (see register_env)


_REGISTRY: dict[str, _Entry] = {}


def register_env(name: str, factory: str | Callable[..., Any], imitable: bool = False) -> None:
    """Register ``factory`` (a callable or ``"module:attr"``) under ``name``.

    Args:
        name: the env's name (``make_env(name)``, ``EnvFactory(name=...)``).
        factory: the env class (or a function building the env), or its ``"module:attr"``.
        imitable: a real env a :class:`~dreamgym.envs.synthetic.SyntheticEnv` can imitate
            (``real_env=name``): its class's ``is_valid_action`` and ``infer_available_actions`` are the
            synthetic env's action rules, and its constructor builds the real env an audit replays in.
    """
    _REGISTRY[name] = _Entry(factory, imitable)


def registered_envs() -> list[str]:
    """Names of all registered envs, sorted."""
    return sorted(_REGISTRY)


def imitable_envs() -> list[str]:
    """Names of the registered envs a synthetic env can imitate (``imitable``), sorted."""
    return sorted(name for name, entry in _REGISTRY.items() if entry.imitable)


def exported_env_classes() -> dict[str, str]:
    """Class name -> ``"module:attr"`` of every env registered by import string from this package
    (``dreamgym.envs.*``): what ``from dreamgym.envs import WebShopEnv`` loads, on first use."""
    return {
        f.rpartition(":")[2]: f
        for entry in _REGISTRY.values()
        if isinstance(f := entry.factory, str) and f.startswith("dreamgym.envs.")
    }


def env_factory(name: str) -> Callable[..., Any]:
    """The class (or function) registered as ``name``, imported now.

    Raises:
        KeyError: naming the unknown env and listing the registered ones.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown env {name!r}; registered envs are {registered_envs()}")
    return resolve(_REGISTRY[name].factory)


def make_env(name: str, **kwargs: Any):
    """Build the env registered as ``name`` with ``kwargs``.

    Raises:
        KeyError: naming the unknown env and listing the registered ones.
        ValueError: for a keyword the env's constructor does not take, naming it and listing those it does.
    """
    cls = env_factory(name)
    init = cls.__init__ if isinstance(cls, type) else cls  # a metaclass __call__ hides a class's own
    params = {k: v for k, v in inspect.signature(init).parameters.items() if k != "self"}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(set(kwargs) - set(params)) if not takes_any else []
    if unknown:
        raise ValueError(f"env {name!r} takes no argument(s) {unknown}; its arguments are {sorted(params)}")
    return cls(**kwargs)


# Built-in envs. Later modules join here, one line each.
register_env("webshop", "dreamgym.envs.webshop.env:WebShopEnv", imitable=True)
register_env("alfworld", "dreamgym.envs.alfworld.env:ALFWorldEnv", imitable=True)
# web: needs chromium + chromedriver (apt) and miniwob
register_env("web", "dreamgym.envs.web.env:WebEnv", imitable=True)
register_env("synthetic", "dreamgym.envs.synthetic:SyntheticEnv")
register_env("agentgym_webshop", "dreamgym.serve.client:WebShopHTTPEnv")  # needs url= of a server
register_env("agentgym_alfworld", "dreamgym.serve.client:ALFWorldHTTPEnv")
# learning checks (scripts/learning_check.py)
register_env("probe_choice", "dreamgym.envs.probes:ChoiceProbeEnv")
register_env("probe_credit", "dreamgym.envs.probes:CreditProbeEnv")
