"""Offline generator of ALFWorld-format household games over ALFRED's real scene layouts.

The ``alfworld`` wheel ships the PDDL domain, the TextWorld grammar, 120 scene layouts (which object
and receptacle *types* each ALFRED floor plan holds, plus poses of some receptacles), goal templates
and placement constants, but none of the 3,553 official games. This module builds games from those:

1. :func:`sample_params` picks, deterministically from a seed, a scene and task parameters that the
   scene supports (ALFRED's per-goal room types, a sink for cleaning, a microwave for heating, a
   fridge for cooling, a lamp on a table for looking; the target receptacle must be able to hold the
   object).
2. :func:`build_problem` builds the scene (static receptacles from the layout, missing ones added,
   one instance of each pickupable type (1-2 of the
   target) placed only where ``VAL_RECEPTACLE_OBJECTS`` allows, lamps on
   a side table, desk or dresser, the agent in the middle of the room) such that the goal does not
   hold at the start, and renders the PDDL problem text.
3. :func:`game_json` assembles the ``game.tw-pddl`` JSON (domain, grammar with the task text, problem,
   solvable flag, walkthrough) and :func:`traj_data` the minimal ``traj_data.json``.

Everything is a pure function of :class:`GameParams`, so a game file is rebuilt byte for byte from
its parameters (see :mod:`dreamgym.envs.alfworld.games`). Planner validation lives in
``scripts/make_alfworld_games.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass
from functools import cache, lru_cache

__all__ = [
    "TASK_TYPES",
    "SPLIT_DIRS",
    "UNSEEN_SCENES",
    "GameParams",
    "Scene",
    "all_scenes",
    "scene_layout",
    "feasible_targets",
    "sample_params",
    "build_problem",
    "task_text",
    "game_json",
    "traj_data",
    "problem_sha1",
    "mangle",
]

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""ALFWorld's six task types, in ALFWorld's order (``TASK_TYPES`` 1..6)."""

SPLIT_DIRS = ("train", "valid_seen", "valid_unseen")
"""ALFWorld's split directories."""

UNSEEN_SCENES = (10, 219, 308, 424)
"""ALFRED's valid_unseen floor plans (one kitchen, living room, bedroom, bathroom): held out of train."""

_LAMPS = ("DeskLamp", "FloorLamp")
_LAMP_HOLDERS = ("SideTable", "Desk", "Dresser")
_STATE_RECEP = {
    "pick_clean_then_place_in_recep": ("Cleanable", "SinkBasin"),
    "pick_heat_then_place_in_recep": ("Heatable", "Microwave"),
    "pick_cool_then_place_in_recep": ("Coolable", "Fridge"),
}
_REQUIRED_RTYPES = ("SinkBasin", "Microwave", "Fridge")  # named by the domain's actions
_REQUIRED_OTYPES = ("Knife", "ButterKnife")


def _constants():
    import alfworld.gen.constants as constants

    return constants


def _room_type(scene: int) -> str:
    return {0: "Kitchen", 2: "LivingRoom", 3: "Bedroom", 4: "Bathroom"}[scene // 100]


def all_scenes() -> list[int]:
    """ALFRED floor-plan numbers that have a layout in the installed ``alfworld`` package."""
    c = _constants()
    return sorted(n for n in c.SCENE_NUMBERS if os.path.exists(_layout_path(n, "objects")))


def _layout_path(scene: int, kind: str) -> str:
    import alfworld.gen

    return os.path.join(os.path.dirname(alfworld.gen.__file__), "layouts", f"FloorPlan{scene}-{kind}.json")


@dataclass(frozen=True)
class Scene:
    """What a floor plan offers: static receptacles (with ALFRED ids) and pickupable types."""

    scene: int
    receptacles: tuple[tuple[str, str], ...]  # (ALFRED id, type), static receptacles only
    pickupable: tuple[str, ...]  # object types that some present receptacle can hold
    lamps: tuple[str, ...]  # lamp types present
    rtypes: frozenset


@cache
def scene_layout(scene: int) -> Scene:
    """Read ``FloorPlan<scene>`` and add the static receptacles its openable list lacks."""
    c = _constants()
    with open(_layout_path(scene, "objects")) as f:
        types = set(json.load(f))
    with open(_layout_path(scene, "openable")) as f:
        poses = json.load(f)
    recs: dict[str, str] = {}
    for rid in sorted(poses):
        parts = rid.split("|")
        rtype = parts[-1] if len(parts) == 5 else parts[0]  # Sink|x|y|z|SinkBasin -> SinkBasin
        if rtype in c.STATIC_RECEPTACLES and rtype not in ("Sink", "Bathtub"):
            recs[rid] = rtype
    present = {t for t in recs.values()}
    rng = random.Random(f"layout-{scene}")
    for rtype in sorted(types):
        if rtype in ("Sink", "Bathtub"):
            rtype += "Basin"
        if rtype not in c.STATIC_RECEPTACLES or rtype in present or rtype not in c.VAL_RECEPTACLE_OBJECTS:
            continue
        count = rng.randint(2, 4) if rtype == "StoveBurner" else 1
        for _ in range(count):
            rid = "|".join([rtype, *(f"{rng.uniform(-3, 3):+06.2f}" for _ in range(3))])
            if rtype in ("SinkBasin", "BathtubBasin"):
                base = rtype[: -len("Basin")]
                rid = rid.replace(rtype, base, 1) + f"|{rtype}"
            recs[rid] = rtype
        present.add(rtype)
    rtypes = frozenset(recs.values())
    pick = sorted(
        t
        for t in types
        if t in c.OBJECTS_SET
        and t not in c.STATIC_RECEPTACLES
        and t not in _LAMPS
        and any(t in c.VAL_RECEPTACLE_OBJECTS[r] for r in rtypes)
    )
    lamps = tuple(t for t in _LAMPS if t in types and rtypes & set(_LAMP_HOLDERS))
    return Scene(scene, tuple(sorted(recs.items())), tuple(pick), lamps, rtypes)


def _holders(obj: str, rtypes) -> list[str]:
    c = _constants()
    return sorted(r for r in rtypes if obj in c.VAL_RECEPTACLE_OBJECTS.get(r, ()))


def feasible_targets(scene: int, task_type: str) -> list[tuple[str, str]]:
    """``(object type, recep-or-toggle type)`` pairs ``task_type`` can use in ``scene`` (sorted)."""
    c = _constants()
    if _room_type(scene) not in c.GOALS_VALID[task_type]:
        return []
    s = scene_layout(scene)
    out = []
    for obj in s.pickupable:
        holders = _holders(obj, s.rtypes)
        if task_type == "look_at_obj_in_light":
            out += [(obj, lamp) for lamp in s.lamps]
            continue
        if task_type in _STATE_RECEP:
            group, needed = _STATE_RECEP[task_type]
            if obj not in c.VAL_ACTION_OBJECTS[group] or needed not in s.rtypes:
                continue
            holders = [r for r in holders if r != needed]
        for recep in holders:
            if [r for r in _holders(obj, s.rtypes) if r != recep]:  # somewhere else to start from
                out.append((obj, recep))
    return out


@dataclass(frozen=True)
class GameParams:
    """Everything a game is rebuilt from.

    Attributes:
        split: one of ``SPLIT_DIRS``.
        task_type: one of ``TASK_TYPES``.
        scene: ALFRED floor-plan number.
        obj: target object type (ALFRED spelling, e.g. "Knife").
        recep: target receptacle type, or the lamp type for ``look_at_obj_in_light``.
        seed: seed of the placement and of the goal template.
    """

    split: str
    task_type: str
    scene: int
    obj: str
    recep: str
    seed: int

    @property
    def name(self) -> str:
        """ALFWorld-style relative game directory, ``<type>-<Obj>-None-<Recep>-<scene>/trial_s<seed>``."""
        return f"{self.task_type}-{self.obj}-None-{self.recep}-{self.scene}/trial_s{self.seed}"

    def to_dict(self) -> dict:
        return asdict(self)


def sample_params(split: str, n: int, seed: int, exclude: set | None = None) -> list[GameParams]:
    """Draw ``n`` distinct game parameter sets for ``split``, reproducibly from ``seed``.

    Task types are drawn round-robin (so every type is represented), then a scene of the split that
    supports the type, then a feasible (object, receptacle) pair. ``train`` and ``valid_seen`` use the
    scenes outside :data:`UNSEEN_SCENES`, ``valid_unseen`` only those. Tasks listed in ``exclude``
    (``(task_type, scene, obj, recep)`` tuples) are skipped, so valid_seen tasks can differ from train's.
    """
    if split not in SPLIT_DIRS:
        raise ValueError(f"split must be one of {SPLIT_DIRS}, got {split!r}")
    rng = random.Random(f"{split}-{seed}")
    scenes = [s for s in all_scenes() if (s in UNSEEN_SCENES) == (split == "valid_unseen")]
    options = {t: [(s, p) for s in scenes for p in feasible_targets(s, t)] for t in TASK_TYPES}
    seen = set(exclude or ())
    out: list[GameParams] = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        task_type = TASK_TYPES[len(out) % len(TASK_TYPES)]
        if not options[task_type]:
            raise ValueError(f"no scene of split {split!r} supports {task_type}")
        scene, (obj, recep) = rng.choice(options[task_type])
        key = (task_type, scene, obj, recep)
        if key in seen:
            continue
        seen.add(key)
        out.append(GameParams(split, task_type, scene, obj, recep, rng.randrange(10**6)))
    return out


def mangle(alfred_id: str) -> str:
    """ALFRED id -> PDDL name (``|``->``_bar_`` etc.), as ALFWorld's game files spell them."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        alfred_id = alfred_id.replace(a, b)
    return alfred_id


def _coords(rng: random.Random) -> str:
    return "|".join(f"{rng.uniform(-3, 3):+06.2f}" for _ in range(3))


def _place_objects(p: GameParams, s: Scene, rng: random.Random) -> list[tuple[str, str, str]]:
    """(object id, type, receptacle id) for every object instance; the goal must not hold at start."""
    by_type: dict[str, list[str]] = {}
    for rid, rtype in s.receptacles:
        by_type.setdefault(rtype, []).append(rid)
    placed = []
    for obj in s.pickupable:
        if obj == p.obj:
            count = 2 if p.task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
        else:
            count = 1  # one instance per distractor type keeps PDDL translation and steps fast
        holders = _holders(obj, s.rtypes)
        if obj == p.obj and p.task_type != "look_at_obj_in_light":
            holders = [r for r in holders if r != p.recep]  # goal must not hold at the start
        for _ in range(count):
            rid = rng.choice(by_type[rng.choice(holders)])
            placed.append((f"{obj}|{_coords(rng)}", obj, rid))
    if p.task_type == "look_at_obj_in_light":
        holders = [rid for rid, rt in s.receptacles if rt in _LAMP_HOLDERS]
        placed.append((f"{p.recep}|{_coords(rng)}", p.recep, rng.choice(holders)))
    return placed


def task_text(p: GameParams) -> str:
    """The templated task description, e.g. "put a knife in countertop" (ALFWorld's rule)."""
    import alfworld.gen.goal_library as glib

    template = random.Random(f"task-{p.seed}").choice(glib.gdict[p.task_type]["templates"])
    toggle = p.recep if p.task_type == "look_at_obj_in_light" else ""
    return template.format(obj=p.obj.lower(), recep=p.recep.lower(), toggle=toggle.lower(), mrecep="")


def _goal_pddl(p: GameParams) -> str:
    import alfworld.gen.goal_library as glib

    toggle = p.recep if p.task_type == "look_at_obj_in_light" else ""
    text = glib.gdict[p.task_type]["pddl"].format(obj=p.obj, recep=p.recep, toggle=toggle, mrecep="")
    return text.replace("#", "-")


def build_problem(p: GameParams, relevant_only: bool = False) -> str:
    """The PDDL problem text of game ``p`` (deterministic).

    With ``relevant_only`` the problem keeps only the goal's objects (target instances, the lamp) and
    every receptacle: the planning problem ALFRED's own planner solves. In this domain other objects
    never block a plan (receptacles have no capacity; the agent only picks up targets), so a plan of
    the relevant problem is a plan of the game, and its search is far smaller.
    """
    c = _constants()
    s = scene_layout(p.scene)
    rng = random.Random(f"scene-{p.scene}-{p.seed}-{p.task_type}-{p.obj}-{p.recep}")
    placed = _place_objects(p, s, rng)
    if relevant_only:
        placed = [x for x in placed if x[1] in (p.obj, p.recep)]
    otypes = sorted({t for _, t, _ in placed} | set(_REQUIRED_OTYPES))
    rtypes = sorted(s.rtypes | set(_REQUIRED_RTYPES))
    locs = {
        rid: f"loc|{i + 1}|{rng.randint(-12, 12)}|{90 * rng.randint(0, 3)}|{rng.choice((0, 30, 60))}"
        for i, (rid, _) in enumerate(s.receptacles)
    }
    start = f"loc|0|{rng.randint(-12, 12)}|{90 * rng.randint(0, 3)}|30"
    m = mangle
    objs = ["agent1 - agent"]
    objs += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    objs += [f"{m(oid)} - object" for oid, _, _ in placed]
    objs += [f"{m(rid)} - receptacle" for rid, _ in s.receptacles]
    objs += [f"{m(loc)} - location" for loc in [start, *locs.values()]]
    init = [f"(atLocation agent1 {m(start)})", "(= (total-cost) 0)"]
    for rid, rtype in s.receptacles:
        init += [f"(receptacleType {m(rid)} {rtype}Type)", f"(receptacleAtLocation {m(rid)} {m(locs[rid])})"]
        if rtype in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {m(rid)})")
    present_o = {t for _, t, _ in placed}
    for rtype in sorted(s.rtypes):
        init += [
            f"(canContain {rtype}Type {o}Type)" for o in sorted(c.VAL_RECEPTACLE_OBJECTS[rtype] & present_o)
        ]
    fridge = {rid for rid, rt in s.receptacles if rt == "Fridge"}
    acts = c.VAL_ACTION_OBJECTS
    for oid, otype, rid in placed:
        o = m(oid)
        init += [
            f"(objectType {o} {otype}Type)",
            f"(inReceptacle {o} {m(rid)})",
            f"(objectAtLocation {o} {m(locs[rid])})",
        ]
        init.append(f"(toggleable {o})" if otype in _LAMPS else f"(pickupable {o})")
        if otype in c.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {o})")
        for group, pred in (
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
            ("Sliceable", "sliceable"),
        ):
            if otype in acts[group]:
                init.append(f"({pred} {o})")
        if rid in fridge and otype in acts["Coolable"]:
            init.append(f"(isCool {o})")  # ALFWorld's quirk: things in the fridge start cool
    name = f"plan_{p.task_type}_{p.scene}_{p.seed}"
    return (
        f"(define (problem {name})\n(:domain alfred)\n(:objects\n"
        + "\n".join(objs)
        + "\n)\n(:init\n"
        + "\n".join(init)
        + "\n)\n"
        + _goal_pddl(p).strip()
        + "\n"
    )


@lru_cache(maxsize=4)
def _asset(name: str) -> str:
    import alfworld

    with open(os.path.join(os.path.dirname(alfworld.__file__), "data", name)) as f:
        return f.read()


def game_json(p: GameParams, walkthrough: list[str] | None = None, problem: str | None = None) -> dict:
    """The ``game.tw-pddl`` content of ``p`` (domain, grammar with the task, problem, solvable, plan)."""
    return {
        "pddl_domain": _asset("alfred.pddl"),
        "grammar": _asset("alfred.twl2").replace("UNKNOWN GOAL", task_text(p)),
        "pddl_problem": problem if problem is not None else build_problem(p),
        "solvable": True,
        "walkthrough": list(walkthrough or []),
    }


def traj_data(p: GameParams) -> dict:
    """The minimal ``traj_data.json`` ALFWorld's loaders read (task type and PDDL parameters)."""
    look = p.task_type == "look_at_obj_in_light"
    return {
        "task_type": p.task_type,
        "scene": {"floor_plan": f"FloorPlan{p.scene}", "scene_num": p.scene},
        "task_desc": task_text(p),
        "pddl_params": {
            "object_target": p.obj,
            "parent_target": "" if look else p.recep,
            "toggle_target": p.recep if look else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
    }


def problem_sha1(problem: str) -> str:
    """Short content hash stored in the manifest to detect a drifted generator."""
    return hashlib.sha1(problem.encode()).hexdigest()[:16]
