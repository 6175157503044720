"""Grounding a synthetic env in the offline record: answer from real steps, write only real entities.

A synthetic env with ``ground=True`` (:class:`dreamgym.envs.synthetic.SyntheticEnv`) asks the imitated
env's :meth:`~dreamgym.envs.base.TextEnvBase.grounding` before it calls the experience model. The
grounding indexes the replay buffer's *real* transitions (never the real env, its catalog, search engine
or reward function; written-back synthetic steps are skipped) and answers one step with an
:class:`Answer`:

* ``"read"``: a recorded real step whose next state, reward and end the env's semantics say are this
  step's too (ALFWorld: a path-free ``go to R`` of the same game; WebShop: the results page of the same
  query and page, a recorded product's page);
* ``"composed"``: a next state the env's semantics derive from recorded pages and the episode's own
  states (WebShop: an option click marks the value selected; ``< prev`` returns to the page shown before);
* ``"reward"``: the next state is known (WebShop's done page of a recorded product) but the record holds
  no purchase of this product with these options for this task: the experience model (or its judge)
  says the reward and score, conditioned on the real item page;
* ``"void"``: an ending on an entity the record does not hold (a purchase of a product whose page the
  model wrote): it pays nothing, and the env marks it ``sim_error`` so RL leaves it out of its updates.

A step the record cannot answer is written by the model (or, with ``unrecorded="nearest"``, read from
the nearest recorded step; with ``unrecorded="search"``, composed by :meth:`Grounding.compose` where the
env has a rule for it, else written by the model), and :meth:`Grounding.constrain` then rewrites what was written so that it
names only recorded entities (WebShop: each results line becomes a recorded product with a recorded page);
a written ending of a step the real env never ends at (:meth:`Grounding.can_end`: WebShop ends only at a
purchase) is void as well.

:class:`PathFreeGrounding` is the default for every env: the imitated env's
:meth:`~dreamgym.envs.base.TextEnvBase.path_free` rule over recorded steps of the same task.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dreamgym.schema import Transition

__all__ = ["Answer", "Grounding", "PathFreeGrounding", "ANSWER_KINDS"]

ANSWER_KINDS = ("read", "composed", "reward", "void")


@dataclass
class Answer:
    """The record's answer to one step (module docstring for the kinds).

    ``reward``, ``score`` and ``done`` are the step's for ``"read"`` and ``"composed"``; for ``"reward"``
    only ``next_state`` and ``done`` hold (the model says the reward); ``"void"`` pays nothing.
    """

    kind: Literal["read", "composed", "reward", "void"]
    next_state: str
    reward: float = 0.0
    score: float = 0.0
    done: bool = False


class Grounding:
    """What the offline record says about steps of one imitated env (module docstring).

    Subclasses implement :meth:`_index` (one real transition into their tables) and :meth:`answer`;
    :meth:`constrain` defaults to the identity.
    """

    def __init__(self) -> None:
        self._seen = 0  # buffer transitions indexed so far
        self._buffer: Any = None
        self._files: list[Path] = []  # more real episodes in the record (:meth:`add_files`)

    def add_files(self, paths: Sequence[str | os.PathLike]) -> Grounding:
        """Put the real episodes of trajectory files ``paths`` in the record beside the buffer's (offline real
        data the experience model was not trained on, e.g. the reward judge's purchases): their real
        transitions are indexed now and again whenever the buffer changes; synthetic ones never are.
        Returns ``self``.

        Raises:
            FileNotFoundError: a file that does not exist (named).
        """
        from dreamgym.schema import iter_transitions, read_trajectories

        new = [Path(p) for p in paths]
        for path in new:
            for t in iter_transitions(read_trajectories(path)):
                if t.source != "synthetic":
                    self._index(t)
        self._files += new
        return self

    def sync(self, buffer: Any) -> Grounding:
        """Index the real transitions ``buffer`` (a :class:`~dreamgym.retrieval.buffer.ReplayBuffer`) holds
        that were not indexed yet; synthetic ones (``source="synthetic"``) never are. Returns ``self``."""
        if buffer is not self._buffer:
            self._buffer, self._seen = buffer, 0
            self._reset()
            files, self._files = self._files, []
            self.add_files(files)
        for t in buffer.transitions[self._seen :]:
            if t.source != "synthetic":
                self._index(t)
        self._seen = len(buffer.transitions)
        return self

    def _reset(self) -> None:
        """Forget every indexed transition (a new buffer)."""

    def _index(self, t: Transition) -> None:
        raise NotImplementedError

    def answer(
        self, task_id: str, states: Sequence[str], actions: Sequence[str], action: str
    ) -> Answer | None:
        """The record's answer to taking ``action`` after ``actions`` (the episode's, oldest first), whose
        states were ``states`` (``s_0`` first, the current state last); None: the record cannot answer."""
        raise NotImplementedError

    def can_end(self, states: Sequence[str], action: str) -> bool | None:
        """Whether the real env can end the episode at ``action`` taken in ``states[-1]`` (False: a written
        ending of this step is one the real env never shows); None: the env's rule is not known here."""
        return None

    def compose(self, states: Sequence[str], action: str) -> Answer | None:
        """A step the record does not hold, composed from recorded entities by the env's own rule instead
        of written by the model (``unrecorded="search"``; WebShop: a results page of a query the record
        never saw, ranked by a search over what the record shows of each product); None: no such rule,
        the model writes it. Default: None."""
        return None

    def constrain(self, states: Sequence[str], action: str, next_state: str) -> tuple[str, int]:
        """``next_state`` written for ``action`` (by the model, or read from a neighbour) rewritten to name
        only entities the record holds, and how many of its entities were replaced or dropped."""
        return next_state, 0


class PathFreeGrounding(Grounding):
    """Read a step from a recorded real step of the same task that took the same action, where the
    env's :meth:`~dreamgym.envs.base.TextEnvBase.path_free` holds for both (the default grounding)."""

    def __init__(self, env_cls: type) -> None:
        super().__init__()
        self.env_cls = env_cls
        self._steps: dict[tuple[str, str], Transition] = {}

    def _reset(self) -> None:
        self._steps = {}

    def _index(self, t: Transition) -> None:
        key = (t.task_id, t.action)
        if key not in self._steps and self.env_cls.path_free(t.action, self._buffer.earlier_actions(t)):
            self._steps[key] = t  # the oldest path-free one

    def answer(
        self, task_id: str, states: Sequence[str], actions: Sequence[str], action: str
    ) -> Answer | None:
        if not self.env_cls.path_free(action, actions):
            return None
        t = self._steps.get((task_id, action))
        if t is None:
            return None
        return Answer("read", t.next_state, float(t.reward), float(t.score), bool(t.done))
