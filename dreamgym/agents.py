"""Scripted agents for offline data: oracle experts, a random policy and imperfect WebShop policies.

``Agent.act(obs, info) -> str``: ``obs`` is TextObs-like (``instruction``, ``observation``,
``available_actions``), ``info`` the env's privileged step info (``env.step_info(slot)``; experts read
the hidden goal from it). ``Agent.reset(seed)`` starts a new episode.

Policies by name (the ``policy`` of collected trajectories, see :func:`make_agent`):

- ``expert``: the env's oracle (:func:`make_expert`, registered per env with :func:`register_expert`);
- ``random``: :class:`RandomAgent`, any env; ``random_queries``: the same, its queries any instruction
  words rather than a run of them (more distinct real pages, e.g. for retrieval at scale);
- ``non_oracle`` (WebShop): :class:`~dreamgym.envs.webshop.agents.VisibleTextAgent`, a heuristic that
  reads only the visible text;
- ``near_miss`` (WebShop): :class:`~dreamgym.envs.webshop.agents.NearMissAgent`, the oracle committing
  one deliberate mistake.
- ALFWorld: ``non_oracle`` is the visible-text searcher and ``near_miss`` the searcher committing one
  placement mistake (:mod:`dreamgym.envs.alfworld.searcher`).

Env-specific agents live with their env (``dreamgym/envs/webshop/agents.py``,
``dreamgym/envs/alfworld/expert.py``) and are registered here by import string, so importing this
module imports no env.
- web: ``random`` and ``near_miss`` of :mod:`dreamgym.envs.web.experts` (its expert reads only the state).

Other envs add policies with :func:`register_agent`.
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from dreamgym._imports import resolve

__all__ = [
    "Agent",
    "RandomAgent",
    "instruction_words",
    "register_expert",
    "make_expert",
    "expert_names",
    "register_agent",
    "make_agent",
    "agent_names",
]


class Agent(ABC):
    """A policy over text observations. ``act`` must return one action string."""

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (``seed`` makes its random choices reproducible)."""
        self.rng = random.Random(seed)

    @abstractmethod
    def act(self, obs: Any, info: dict[str, Any]) -> str:
        """The next action for ``obs`` (TextObs-like) given privileged ``info``."""


PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars$")
"""WebShop's closing price clause: a constraint, not words to search for."""


def instruction_words(instruction: str) -> list[str]:
    """The instruction's lower-cased words, without a closing price clause."""
    return re.findall(r"[a-z0-9][a-z0-9'\-.]*", PRICE_CLAUSE.sub("", instruction.lower()))


class RandomAgent(Agent):
    """Uniform over the available actions; ``search[<query>]`` is filled with 2-5 instruction words.

    Args:
        seed: seeds the choices.
        query: ``"span"``: a run of consecutive instruction words; ``"words"``: distinct instruction words
            drawn anywhere, in drawn order (many more distinct queries, so many more distinct real results
            pages: the ``random_queries`` policy).
    """

    QUERIES = ("span", "words")

    def __init__(self, seed: int | None = None, query: str = "span"):
        if query not in self.QUERIES:
            raise ValueError(f"RandomAgent query={query!r}; use one of {self.QUERIES}")
        self.query = query
        self.reset(seed)

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        actions = list(obs.available_actions) or ["click[back to search]"]
        a = self.rng.choice(actions)
        if a.startswith("search["):
            words = instruction_words(obs.instruction) or ["item"]
            k = min(len(words), self.rng.randint(2, 5))
            if self.query == "words":
                picked = self.rng.sample(words, k)
            else:
                start = self.rng.randint(0, len(words) - k)
                picked = words[start : start + k]
            a = f"search[{' '.join(picked)}]"
        return a


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


register_expert("webshop", "dreamgym.envs.webshop.agents:make_webshop_expert")
register_expert("alfworld", "dreamgym.envs.alfworld.expert:make_alfworld_expert")
register_expert("web", "dreamgym.envs.web.experts:make_web_expert")


_AGENTS: dict[tuple[str | None, str], str | Callable[..., Agent]] = {}


def register_agent(env_name: str | None, policy_name: str, factory: str | Callable[..., Agent]) -> None:
    """Register policy ``policy_name`` for ``env_name`` (``None``: every env).

    ``factory`` is a callable ``(env, **kwargs) -> Agent`` or a ``"module:attr"`` string. The name
    ``expert`` is reserved: experts join with :func:`register_expert`.
    """
    if policy_name == "expert":
        raise ValueError("register experts with register_expert(env_name, factory)")
    _AGENTS[(env_name, policy_name)] = factory


def agent_names(env_name: str) -> list[str]:
    """The policy names :func:`make_agent` knows for ``env_name``."""
    names = {p for (e, p) in _AGENTS if e in (None, env_name)}
    return sorted(names | ({"expert"} if env_name in _EXPERTS else set()))


def make_agent(
    policy_name: str, env_name: str, env: Any = None, seed: int | None = None, **kwargs: Any
) -> Agent:
    """A fresh ``policy_name`` agent for ``env_name``, reset with ``seed``.

    ``expert`` is the env's expert (:func:`make_expert`); other names come from :func:`register_agent`,
    env-specific ones before those registered for every env.

    Raises:
        KeyError: naming the policy, the env and the policies it has.
    """
    if policy_name == "expert":
        agent = make_expert(env_name, env, **kwargs)
    else:
        factory = _AGENTS.get((env_name, policy_name), _AGENTS.get((None, policy_name)))
        if factory is None:
            raise KeyError(
                f"no policy {policy_name!r} for env {env_name!r}; its policies: {agent_names(env_name)}"
            )
        agent = resolve(factory)(env, **kwargs)
    agent.reset(seed)
    return agent


def _random_agent(env: Any = None, **kwargs: Any) -> Agent:
    return RandomAgent(**kwargs)


def _random_queries_agent(env: Any = None, **kwargs: Any) -> Agent:
    return RandomAgent(query="words", **kwargs)


register_agent(None, "random", _random_agent)
register_agent(None, "random_queries", _random_queries_agent)
register_agent("webshop", "non_oracle", "dreamgym.envs.webshop.agents:make_visible_text_agent")
register_agent("webshop", "near_miss", "dreamgym.envs.webshop.agents:make_near_miss_agent")
register_agent("alfworld", "non_oracle", "dreamgym.envs.alfworld.searcher:make_alfworld_searcher")
register_agent("alfworld", "near_miss", "dreamgym.envs.alfworld.searcher:make_alfworld_near_miss")
register_agent("web", "random", "dreamgym.envs.web.experts:make_web_random")
register_agent("web", "near_miss", "dreamgym.envs.web.experts:make_web_near_miss")
