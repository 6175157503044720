"""A visible-text ALFWorld agent: it knows the goal, not where anything is.

The expert (:mod:`dreamgym.envs.alfworld.expert`) follows the planner's walkthrough, which knows where
every object lies: its first ``go to shelf 2`` cannot be derived from anything the policy sees, so a
policy cloned from it learns a blind prior over receptacles (measured: the warm start cloned from it
solved 1 of 134 ``valid_unseen`` games). This agent only uses what the policy's prompt holds: the goal
(the instruction names the object, the receptacle or lamp, and the task type; ``info["targets"]`` and
``info["task_type"]`` are those words parsed), the admissible commands, and where it is (the last
state says "You arrive at ...") - every decision depends on the current step alone, so a policy with a
short history window can imitate it:

- holding the goal object: ``use`` the lamp when the command is admissible (look-at tasks), else
  ``clean`` / ``heat`` / ``cool`` it (opening the appliance first when closed) at the sink basin /
  microwave / fridge when the task asks and it has just been taken or the agent has just arrived there, else ``move`` it to the goal receptacle when admissible, else go
  to the next place that serves (the appliance right after taking it, then the goal receptacle; a lamp
  is searched for like an object);
- not holding it: ``take`` a goal object from where the agent is (in a pick-two task never from the
  goal receptacle, where the first object already lies), else ``open`` the receptacle here when closed,
  else ``go to`` the next receptacle after the current one in the admissible commands' order.

It fails where the search needs more than the step limit or a receptacle needs a command it never
tries; the pipeline clones only its successful episodes.
"""

from __future__ import annotations

import re
from typing import Any

from dreamgym.agents import Agent

__all__ = [
    "ALFWorldSearcher",
    "ALFWorldNearMiss",
    "NEAR_MISS_MODES",
    "make_alfworld_searcher",
    "make_alfworld_near_miss",
    "object_kind",
    "move_parts",
    "take_parts",
    "transformation",
]

_APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_MOVE = re.compile(r"^(?:move|put) (.+?) (?:to|in|on|in/on) (.+)$")


def object_kind(name: str) -> str:
    """``alarmclock`` for ``alarmclock 2``."""
    return _order(name)[0]


def move_parts(command: str) -> tuple[str, str] | None:
    """``(object, receptacle)`` of a ``move X to Y`` (or ``put X in/on Y``) command, else None."""
    m = _MOVE.match(command)
    return (m.group(1), m.group(2)) if m else None


def transformation(task_type: str) -> str | None:
    """The ``clean`` / ``heat`` / ``cool`` a task type asks for, else None."""
    return next((v for v in _APPLIANCE if f"_{v}_" in f"_{task_type}_"), None)


def _goes(admissible: list[str]) -> list[str]:
    """The receptacles of the admissible ``go to`` commands."""
    return [c[len("go to ") :] for c in admissible if c.startswith("go to ")]


def _go_to(goes: list[str], kind: str) -> str | None:
    """``go to`` the first of ``goes`` of this kind (None: none admissible)."""
    return next((f"go to {r}" for r in goes if object_kind(r) == kind), None)


def take_parts(command: str) -> tuple[str, str] | None:
    """``(object, receptacle)`` of a ``take X from Y`` command, else None."""
    if not (command.startswith("take ") and " from " in command):
        return None
    what, where = command[len("take ") :].split(" from ", 1)
    return what, where


class ALFWorldSearcher(Agent):
    """Searches receptacles in order for the goal object and completes the task (module docstring)."""

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        targets = {k: v.lower() for k, v in (info.get("targets") or {}).items()}
        task = info.get("task_type") or ""
        admissible = list(info.get("admissible_commands") or getattr(obs, "available_actions", []) or [])
        here = info.get("location")
        obj, recep, lamp = targets.get("obj", ""), targets.get("recep", ""), targets.get("toggle", "")
        need = transformation(task)
        held = [o for o in info.get("holding") or [] if object_kind(o) == obj]
        goes = _goes(admissible)

        if held:
            o = held[0]
            if lamp:
                use = next(
                    (c for c in admissible if c.startswith("use ") and object_kind(c[4:]) == lamp), None
                )
                return use or self._next(here, goes, admissible)
            last = info.get("command") or ""
            verb = next((c for c in admissible if need and c.startswith(f"{need} {o} with ")), None)
            if need and last.startswith("take "):  # just picked up: transform it first
                return verb or _go_to(goes, _APPLIANCE[need]) or self._next(here, goes, admissible)
            if (
                need
                and here is not None
                and object_kind(here) == _APPLIANCE[need]
                and not last.startswith(need)
            ):
                if verb or f"open {here}" in admissible:
                    return verb or f"open {here}"
            return self._deliver(o, recep, here, goes, admissible)
        for c in admissible:
            if (took := take_parts(c)) is not None:
                what, where = took
                if object_kind(what) == obj and not (
                    task == "pick_two_obj_and_place" and object_kind(where) == recep
                ):
                    return c
        if here is not None and f"open {here}" in admissible:
            return f"open {here}"
        return self._next(here, goes, admissible)

    def _deliver(self, o: str, recep: str, here: str | None, goes: list[str], admissible: list[str]) -> str:
        """Put the held ``o`` in a ``recep`` receptacle: ``move`` it when admissible, else open the one here
        when closed, else go to one (or on to the next receptacle)."""
        for c in admissible:
            m = move_parts(c)
            if m and m[0] == o and object_kind(m[1]) == recep:
                return c
        if here is not None and object_kind(here) == recep and f"open {here}" in admissible:
            return f"open {here}"
        return _go_to(goes, recep) or self._next(here, goes, admissible)

    @staticmethod
    def _next(here: str | None, goes: list[str], admissible: list[str]) -> str:
        """``go to`` the receptacle after ``here`` in the admissible commands' order (wrapping)."""
        if not goes:
            return "look" if "look" in admissible else (admissible[0] if admissible else "look")
        ordered = sorted(goes, key=_order)
        if here is None:
            return f"go to {ordered[0]}"
        after = [r for r in ordered if _order(r) > _order(here)]
        return f"go to {(after or ordered)[0]}"


def _order(name: str) -> tuple[str, int]:
    kind, _, num = name.rpartition(" ")
    return (kind, int(num)) if num.isdigit() else (name, 0)


def make_alfworld_searcher(env: Any = None, **kwargs: Any) -> ALFWorldSearcher:
    """The ``non_oracle`` factory of :func:`dreamgym.agents.make_agent` for ALFWorld."""
    return ALFWorldSearcher(**kwargs)


NEAR_MISS_MODES = ("wrong_place", "skip_step", "wrong_object")


class ALFWorldNearMiss(ALFWorldSearcher):
    """The searcher committing one deliberate placement mistake per episode, then searching on as before.

    The experience model learns when a placement wins from these: the offline searcher and expert place
    almost only where the goal holds, so a model trained on them alone called 45 of 45 held-out wrong
    placements of the warm start a win (BENCHMARKS.md). Modes (one drawn per episode; :attr:`mode` is
    the one committed):

    - ``wrong_place``: the goal object, once held, is moved to where the agent stands (not the goal
      receptacle); the searcher then takes it again and goes on (the policy's commonest failure);
    - ``skip_step``: a clean / heat / cool task's object is carried to the goal receptacle without the
      transformation (then taken again and finished properly);
    - ``wrong_object``: an object of another kind is taken and placed in the goal receptacle first.

    A mode impossible in the episode (``skip_step`` without a transformation to skip, ``wrong_object`` in
    a look-at task, which places nothing) falls back to ``wrong_place``; so does a decoy no goal receptacle
    admits within ``patience`` steps of carrying it (it is put down where the agent stands). Every step stays an admissible command.

    Args:
        modes: the modes to draw from.
        patience: steps a ``wrong_object`` decoy is carried looking for a goal receptacle that admits it.
        seed: seed of the episode's draw.

    Raises:
        ValueError: if ``modes`` is empty or names an unknown mode.
    """

    def __init__(self, modes: tuple[str, ...] = NEAR_MISS_MODES, patience: int = 12, seed: int | None = None):
        unknown = [m for m in modes if m not in NEAR_MISS_MODES]
        if not modes or unknown:
            raise ValueError(
                f"ALFWorldNearMiss.modes must be a non-empty subset of {NEAR_MISS_MODES}; got {modes!r}"
            )
        self.modes, self.patience = tuple(modes), patience
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.mode, self.committed, self.decoy, self.carried = self.rng.choice(self.modes), False, None, 0

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        if self.committed:
            return super().act(obs, info)
        targets = {k: v.lower() for k, v in (info.get("targets") or {}).items()}
        obj, recep = targets.get("obj", ""), targets.get("recep", "")
        task = info.get("task_type") or ""
        admissible = list(info.get("admissible_commands") or getattr(obs, "available_actions", []) or [])
        holding = list(info.get("holding") or [])
        if (self.mode == "skip_step" and transformation(task) is None) or (
            self.mode == "wrong_object" and not recep  # a look-at task places nothing
        ):
            self.mode = "wrong_place"
        if self.mode == "wrong_object":
            return self._decoy_step(obj, recep, holding, admissible, info) or super().act(obs, info)
        if self.mode == "skip_step":
            action = super().act(obs, {**info, "task_type": "pick_and_place_simple"})
        else:
            action = super().act(obs, info)
            held = [o for o in holding if object_kind(o) == obj]
            wrong = [c for c in admissible if held and (m := move_parts(c)) and m[0] == held[0]
                     and object_kind(m[1]) != recep]  # fmt: skip
            if wrong:
                action = wrong[0]
        m = move_parts(action)
        self.committed = bool(m and object_kind(m[0]) == obj)
        return action

    def _decoy_step(self, obj, recep, holding, admissible, info) -> str | None:
        """Take an object of another kind, carry it to the goal receptacle, place it (None: no decoy in
        reach yet; the searcher's step)."""
        if self.decoy is None:
            if holding:
                return None
            takes = [
                c for c in admissible if (took := take_parts(c)) is not None and object_kind(took[0]) != obj
            ]
            if not takes:
                return None
            self.decoy = take_parts(takes[0])[0]
            return takes[0]
        here, goes = info.get("location"), _goes(admissible)
        action = self._deliver(self.decoy, recep, here, goes, admissible)
        if move_parts(action):
            self.committed = True
            return action
        self.carried += 1
        if self.carried > self.patience:  # no goal receptacle admits it (too big): put it down elsewhere
            drop = [c for c in admissible if (m := move_parts(c)) and m[0] == self.decoy]
            if drop:
                self.mode, self.decoy = "wrong_place", None
                return drop[0]
            return self._next(here, goes, admissible)
        return action


def make_alfworld_near_miss(env: Any = None, **kwargs: Any) -> ALFWorldNearMiss:
    """The ``near_miss`` factory of :func:`dreamgym.agents.make_agent` for ALFWorld."""
    return ALFWorldNearMiss(**kwargs)
