"""Scripted agents for offline data: per-env oracle experts and a random policy, behind one interface.

``Agent.act(obs, info) -> str``: ``obs`` is TextObs-like (``instruction``, ``observation``,
``available_actions``), ``info`` the env's privileged step info (``env.step_info(slot)``; experts read
the hidden goal from it). ``Agent.reset(seed)`` starts a new episode. Experts are built per env with
:func:`make_expert` from a registry that other envs join with :func:`register_expert`.
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from rapidfuzz import fuzz

from dreamgym._imports import resolve

__all__ = ["Agent", "RandomAgent", "WebShopExpert", "register_expert", "make_expert", "expert_names"]


class Agent(ABC):
    """A policy over text observations. ``act`` must return one action string."""

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (``seed`` makes its random choices reproducible)."""
        self.rng = random.Random(seed)

    @abstractmethod
    def act(self, obs: Any, info: dict[str, Any]) -> str:
        """The next action for ``obs`` (TextObs-like) given privileged ``info``."""


_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars$")


def _words(instruction: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9'\-.]*", _PRICE_CLAUSE.sub("", instruction.lower()))


class RandomAgent(Agent):
    """Uniform over the available actions; ``search[<query>]`` is filled with 2-5 instruction words."""

    def __init__(self, seed: int | None = None):
        self.reset(seed)

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        actions = list(obs.available_actions) or ["click[back to search]"]
        a = self.rng.choice(actions)
        if a.startswith("search["):
            words = _words(obs.instruction) or ["item"]
            k = min(len(words), self.rng.randint(2, 5))
            start = self.rng.randint(0, len(words) - k)
            a = f"search[{' '.join(words[start : start + k])}]"
        return a


class WebShopExpert(Agent):
    """Oracle for WebShop: knows the goal's product, searches with varied wording, finds it, buys it.

    Queries vary over episodes: the full instruction, the instruction without the price clause, the
    goal's query + attributes, or the product's title. It pages to the target if it is on a later
    results page, re-searches with the exact title if it is not in the results, sometimes opens a listed
    distractor first (and goes back), sometimes looks at a sub-page, selects the goal's options and buys.

    Args:
        subpage_prob: chance of viewing a sub-page (description/features/reviews) before buying.
        detour_prob: chance of opening another listed product first and going back.
        seed: seed of the episode's choices.
    """

    def __init__(self, subpage_prob: float = 0.25, detour_prob: float = 0.15, seed: int | None = None):
        self.subpage_prob = subpage_prob
        self.detour_prob = detour_prob
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.searches = 0
        self.viewed_sub = self.rng.random() >= self.subpage_prob  # True: skip the sub-page
        self.detoured = self.rng.random() >= self.detour_prob  # True: no look at another product first

    def _query(self, goal: dict[str, Any]) -> str:
        if self.searches > 0:  # fallback: the exact title finds the product
            return goal["name"].lower()
        instr = _PRICE_CLAUSE.sub("", goal["instruction"].lower())
        attrs = " ".join(goal["attributes"][: self.rng.randint(1, 2)])
        options = goal["options"].values() if isinstance(goal["options"], dict) else goal["options"]
        choices = [
            goal["instruction"].lower(),
            instr,
            f"{goal['query']} {attrs}".strip(),
            f"{attrs} {goal['query']} {' '.join(options)}".strip(),
            goal["name"].lower(),
        ]
        return self.rng.choices(choices, weights=[3, 3, 2, 2, 1])[0]

    @staticmethod
    def _wanted_options(goal: dict[str, Any], product_options: dict[str, list[str]]) -> dict[str, str]:
        """Option name -> value to select: exact name/value if present, else the closest value (> 85)."""
        goal_opts = goal["options"]
        pairs = list(goal_opts.items()) if isinstance(goal_opts, dict) else [(None, v) for v in goal_opts]
        want: dict[str, str] = {}
        for gname, v in pairs:
            if gname in product_options and v in product_options[gname]:
                want[gname] = v
                continue
            scored = [
                (100.0 if pv == v else fuzz.token_set_ratio(pv, v), name, pv)
                for name, vals in product_options.items()
                if name not in want
                for pv in vals
            ]
            if scored:
                s, name, pv = max(scored, key=lambda x: x[0])
                if s > 85:
                    want[name] = pv
        return want

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        goal, page = info["goal"], info["page"]
        target = goal["asin"].lower()
        if page == "search":
            q = self._query(goal)
            self.searches += 1
            return f"search[{q}]"
        if page == "results":
            rank = info.get("target_rank")
            if rank is None:
                return "click[back to search]"
            want_page = (rank - 1) // 10 + 1
            if want_page > info["page_num"]:
                return "click[next >]"
            if want_page < info["page_num"]:
                return "click[< prev]"
            if not self.detoured:  # look at a listed distractor first, then come back
                self.detoured = True
                others = [x["asin"].lower() for x in info.get("shown", []) if x["asin"].lower() != target]
                if others:
                    return f"click[{self.rng.choice(others)}]"
            return f"click[{target}]"
        if page in ("description", "features", "reviews", "attributes"):
            return "click[< prev]"
        if page == "item":
            if (info.get("asin") or "").lower() != target:
                return "click[< prev]"
            if not self.viewed_sub:
                self.viewed_sub = True
                return f"click[{self.rng.choice(['description', 'features', 'reviews'])}]"
            want = self._wanted_options(goal, info.get("product_options") or {})
            for name, v in want.items():
                if info["options"].get(name) != v:
                    return f"click[{v}]"
            return "click[buy now]"
        return "click[back to search]"


_EXPERTS: dict[str, str | Callable[..., Agent]] = {}


def register_expert(env_name: str, factory: str | Callable[..., Agent]) -> None:
    """Register the expert of ``env_name``: a callable ``(env, seed=...) -> Agent`` or ``"module:attr"``."""
    _EXPERTS[env_name] = factory


def expert_names() -> list[str]:
    """Envs that have an expert."""
    return sorted(_EXPERTS)


def make_expert(env_name: str, env: Any = None, **kwargs: Any) -> Agent:
    """The expert agent for ``env_name`` (``env`` is passed to factories that need it).

    Raises:
        KeyError: naming the env and the envs that have experts.
    """
    if env_name not in _EXPERTS:
        raise KeyError(f"no expert registered for env {env_name!r}; envs with experts: {expert_names()}")
    return resolve(_EXPERTS[env_name])(env, **kwargs)


def _webshop_expert(env: Any = None, **kwargs: Any) -> Agent:
    return WebShopExpert(**kwargs)


register_expert("webshop", _webshop_expert)
register_expert("alfworld", "dreamgym.envs.alfworld.expert:make_alfworld_expert")
