"""Rule-based ALFWorld teacher: a short, faithful rationale per transition from privileged info.

It reads :meth:`dreamgym.envs.alfworld.env.ALFWorldEnv.step_info` (task type and targets, location,
what is held and open, the facts the command changed, goal progress) and writes 1-3 sentences, e.g.
``"'take mug 1 from countertop 2' is admissible: the agent now holds the mug 1. Progress: holding a mug;
it still has to be cool and placed in coffeemachine. The goal does not hold yet, so the reward is 0."``
"""

from __future__ import annotations

from typing import Any

from dreamgym.schema import Transition
from dreamgym.teachers.base import Teacher

__all__ = ["ALFWorldTeacher"]


class ALFWorldTeacher(Teacher):
    """Explains ALFWorld transitions (see module docstring)."""

    def explain(self, transition: Transition, info: dict[str, Any]) -> str:
        info = info or {}
        if "task_type" not in info:
            return "No privileged information is available for this step."
        if transition.invalid or not info.get("valid", True):
            text = (
                f"'{transition.action}' is not an admissible command here ({_why_invalid(transition.action, info)}), "
                "so the game answers 'Nothing happens.' and the state does not change; the reward is 0."
            )
        else:
            changes = info.get("changes") or []
            what = "; ".join(changes) if changes else "it only reports information and changes nothing"
            text = f"'{transition.action}' is admissible: {what}. {_progress(info)}"
            if info.get("won"):
                text += " The goal now holds, so the episode ends in success with reward 1."
            else:
                text += " The goal does not hold yet, so the reward is 0."
        if transition.truncated and not transition.terminated:
            text += " The step limit is reached, so the episode ends unsuccessfully."
        return text


def _why_invalid(action: str, info: dict[str, Any]) -> str:
    a = action.strip().lower()
    here, holding = info.get("location"), info.get("holding") or []
    opened = set(info.get("opened") or [])
    if not a:
        return "the command is empty"
    if a.startswith("go to "):
        target = a[6:]
        return f"the agent is already at {target}" if target == here else f"there is no '{target}' to go to"
    if a.startswith("take ") and " from " in a:
        obj, recep = a[5:].split(" from ", 1)
        if holding:
            return f"the agent's hands are full: it holds the {holding[0]}"
        if recep != here:
            return f"the agent is at {here or 'the middle of the room'}, not at {recep}"
        if recep in _openables(info) and recep not in opened:
            return f"the {recep} is closed"
        return f"there is no {obj} in/on the {recep}"
    if a.startswith("move ") and " to " in a:
        obj, recep = a[5:].split(" to ", 1)
        if obj not in holding:
            return f"the agent does not hold the {obj}"
        return f"the agent is not at {recep}, or the {recep} is closed or cannot hold the {obj}"
    if a.startswith(("open ", "close ")):
        verb, target = a.split(" ", 1)
        if target != here:
            return f"the agent is not at {target}"
        return f"the {target} is already {'open' if verb == 'open' else 'closed'} or cannot be opened"
    for verb, place in (("clean", "sinkbasin"), ("heat", "microwave"), ("cool", "fridge")):
        if a.startswith(verb + " "):
            return f"to {verb} something the agent must hold it and be at a {place}"
    if a.startswith("use "):
        return "the agent must be at the receptacle holding that lamp"
    return "it is not one of the game's admissible commands"


def _openables(info: dict[str, Any]) -> set[str]:
    cmds = info.get("admissible_commands") or []
    return {c.split(" ", 1)[1] for c in cmds if c.startswith(("open ", "close "))}


def _progress(info: dict[str, Any]) -> str:
    p, t = info.get("progress") or {}, info.get("targets") or {}
    if not p:
        return ""
    obj = (t.get("obj") or "").lower()
    parts = [f"holding a {obj}" if p.get("holding_target") else f"not holding a {obj}"]
    need = p.get("needed_state")
    if need:
        done = p.get("target_in_state") or []
        parts.append(f"{done[0]} is {need}" if done else f"no {obj} is {need} yet")
    if "placed" in p:
        recep = (t.get("recep") or "").lower()
        parts.append(f"{len(p['placed'])}/{p['placed_needed']} placed in {recep}")
    if "lamp_on" in p:
        lamp = (t.get("toggle") or "").lower()
        parts.append(f"the {lamp} is {'on' if p['lamp_on'] else 'off'}")
    return "Progress: " + ", ".join(parts) + "."
