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

__all__ = ["ALFWorldSearcher", "make_alfworld_searcher"]

_APPLIANCE = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
_MOVE = re.compile(r"^(?:move|put) (.+?) (?:to|in|on|in/on) (.+)$")


def _kind(name: str) -> str:
    """``alarmclock`` for ``alarmclock 2``."""
    return _order(name)[0]


class ALFWorldSearcher(Agent):
    """Searches receptacles in order for the goal object and completes the task (module docstring)."""

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        targets = {k: v.lower() for k, v in (info.get("targets") or {}).items()}
        task = info.get("task_type") or ""
        admissible = list(info.get("admissible_commands") or getattr(obs, "available_actions", []) or [])
        here = info.get("location")
        obj, recep, lamp = targets.get("obj", ""), targets.get("recep", ""), targets.get("toggle", "")
        need = next((v for v in _APPLIANCE if f"_{v}_" in f"_{task}_"), None)
        held = [o for o in info.get("holding") or [] if _kind(o) == obj]
        goes = [c[len("go to ") :] for c in admissible if c.startswith("go to ")]

        def go_to(kind: str) -> str | None:
            return next((f"go to {r}" for r in goes if _kind(r) == kind), None)

        if held:
            o = held[0]
            if lamp:
                use = next((c for c in admissible if c.startswith("use ") and _kind(c[4:]) == lamp), None)
                return use or self._next(here, goes, admissible)
            last = info.get("command") or ""
            verb = next((c for c in admissible if need and c.startswith(f"{need} {o} with ")), None)
            if need and last.startswith("take "):  # just picked up: transform it first
                return verb or go_to(_APPLIANCE[need]) or self._next(here, goes, admissible)
            if need and here is not None and _kind(here) == _APPLIANCE[need] and not last.startswith(need):
                if verb or f"open {here}" in admissible:
                    return verb or f"open {here}"
            for c in admissible:
                m = _MOVE.match(c)
                if m and m.group(1) == o and _kind(m.group(2)) == recep:
                    return c
            if here is not None and _kind(here) == recep and f"open {here}" in admissible:
                return f"open {here}"
            return go_to(recep) or self._next(here, goes, admissible)
        for c in admissible:
            if c.startswith("take ") and " from " in c:
                what, where = c[len("take ") :].split(" from ", 1)
                if _kind(what) == obj and not (task == "pick_two_obj_and_place" and _kind(where) == recep):
                    return c
        if here is not None and f"open {here}" in admissible:
            return f"open {here}"
        return self._next(here, goes, admissible)

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
