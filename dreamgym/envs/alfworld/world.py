"""A readable summary of an ALFWorld game state from its PDDL facts (privileged info for teachers).

:func:`summarize` reads the engine's current facts once and returns where the agent is, what it holds,
which receptacles are open, where each object lies, object states (clean/hot/cool/on) and the
progress toward the goal of the game's task type; :func:`world_changes` lists what one command
changed, in words.
"""

from __future__ import annotations

from typing import Any

__all__ = ["summarize", "world_changes", "progress"]

_FLAGS = {"isclean": "clean", "ishot": "hot", "iscool": "cool", "istoggled": "on"}


def summarize(tw, targets: dict[str, str] | None = None, task_type: str = "") -> dict[str, Any]:
    """Summary of the ``PddlEnv`` ``tw``'s state; ``targets`` are ALFRED type names (obj/recep/toggle)."""
    names = getattr(tw, "_dreamgym_names", None)
    if names is None or len(names) != len(tw._entity_infos):
        names = {k: (v.name or k).strip() for k, v in tw._entity_infos.items()}
        tw._dreamgym_names = names  # the display names are fixed once a game is loaded
    at_loc: dict[str, str] = {}
    agent_loc = None
    holding, opened, contents = [], set(), {}
    flags: dict[str, set[str]] = {f: set() for f in _FLAGS.values()}
    otype, rtype = {}, {}
    for fact in tw._pddl_state.facts:
        args = [a.name for a in fact.arguments]
        n = fact.name
        if n == "atlocation":
            agent_loc = args[1]
        elif n == "receptacleatlocation":
            at_loc.setdefault(args[1], names[args[0]])
        elif n == "holds":
            holding.append(names[args[1]])
        elif n == "opened":
            opened.add(names[args[0]])
        elif n == "inreceptacle":
            contents[names[args[0]]] = names[args[1]]
        elif n in _FLAGS:
            flags[_FLAGS[n]].add(names[args[0]])
        elif n == "objecttype":
            otype[names[args[0]]] = args[1]
        elif n == "receptacletype":
            rtype[names[args[0]]] = args[1]
    world = {
        "location": at_loc.get(agent_loc),
        "holding": sorted(holding),
        "opened": opened,
        "contents": contents,
        "flags": {k: sorted(v) for k, v in flags.items()},
    }
    world["progress"] = progress(world, otype, rtype, targets or {}, task_type)
    return world


def progress(
    world: dict, otype: dict, rtype: dict, targets: dict[str, str], task_type: str
) -> dict[str, Any]:
    """Sub-goals of the task: target held, target in the required state, placed, lamp on."""
    if not targets.get("obj"):
        return {}
    want_o = targets["obj"].lower() + "type"
    objs = sorted(o for o, t in otype.items() if t == want_o)
    state = {"clean": "clean", "heat": "hot", "cool": "cool"}
    need = next((v for k, v in state.items() if f"_{k}_" in f"_{task_type}_"), None)
    out: dict[str, Any] = {"target_objects": objs, "holding_target": any(o in world["holding"] for o in objs)}
    if need:
        out["needed_state"] = need
        out["target_in_state"] = sorted(o for o in objs if o in world["flags"][need])
    if targets.get("recep"):
        want_r = targets["recep"].lower() + "type"
        placed = [o for o in objs if rtype.get(world["contents"].get(o, ""), "") == want_r]
        if need:
            placed = [o for o in placed if o in world["flags"][need]]
        out["placed"] = sorted(placed)
        out["placed_needed"] = 2 if task_type == "pick_two_obj_and_place" else 1
    if targets.get("toggle"):
        want_t = targets["toggle"].lower() + "type"
        lamps = [o for o, t in otype.items() if t == want_t]
        out["lamp_on"] = any(lamp in world["flags"]["on"] for lamp in lamps)
        out["lamp_here"] = any(world["contents"].get(lamp) == world["location"] for lamp in lamps)
    return out


def world_changes(before: dict, after: dict) -> list[str]:
    """What changed between two summaries, as short sentences."""
    out = []
    if before["location"] != after["location"]:
        out.append(f"the agent is now at {after['location'] or 'the middle of the room'}")
    for o in sorted(set(after["holding"]) - set(before["holding"])):
        out.append(f"the agent now holds the {o}")
    for o in sorted(set(before["holding"]) - set(after["holding"])):
        where = after["contents"].get(o)
        out.append(f"the {o} is now in/on the {where}" if where else f"the agent no longer holds the {o}")
    for r in sorted(after["opened"] - before["opened"]):
        out.append(f"the {r} is now open")
    for r in sorted(before["opened"] - after["opened"]):
        out.append(f"the {r} is now closed")
    for flag in ("clean", "hot", "cool", "on"):
        for o in sorted(set(after["flags"][flag]) - set(before["flags"][flag])):
            out.append(f"the {o} is now {flag}")
        for o in sorted(set(before["flags"][flag]) - set(after["flags"][flag])):
            out.append(f"the {o} is no longer {flag}")
    return out
