"""Offline generator of ALFWorld-format household games over ALFRED's real scene layouts.

The ``alfworld`` wheel ships the PDDL domain, the TextWorld grammar, 120 scene layouts (which object
and receptacle *types* each ALFRED floor plan holds, plus the receptacle instances ALFRED recorded
poses for), goal templates and placement constants, but none of the 3,553 official games. This module
builds games from those:

1. :func:`sample_params` picks, deterministically from a seed, a scene and task parameters that the
   scene supports (ALFRED's per-goal room types, a sink for cleaning, a microwave for heating, a
   fridge for cooling, a lamp on a table for looking; the target receptacle must be able to hold the
   object, and the target must have somewhere to start from where the goal does not hold).
2. :func:`build_problem` builds the scene (:mod:`.scenes`: the floor plan's receptacles, several
   instances of every pickupable type placed only where ``VAL_RECEPTACLE_OBJECTS`` allows, the
   scene's lamps on a side table, desk or dresser, the agent in the middle of the room) such that
   the goal does not hold at the start and no part of it is done already: no target starts in the
   goal receptacle, and a cooling task's targets never start in the fridge (where ALFRED's rule makes
   the target type start cool), and renders the PDDL problem text.
3. :func:`game_json` assembles the ``game.tw-pddl`` JSON (domain, grammar with the task text, problem,
   solvable flag, walkthrough) and :func:`traj_data` the ``traj_data.json`` fields ALFWorld's tools
   read (task type, PDDL parameters, scene, annotations; :mod:`.goals`).

Everything is a pure function of :class:`GameParams`, so a game file is rebuilt byte for byte from
its parameters (see :mod:`dreamgym.envs.alfworld.games`). Planner validation lives in
``scripts/make_alfworld_games.py``.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import asdict, dataclass
from functools import lru_cache

from dreamgym.envs.alfworld import goals
from dreamgym.envs.alfworld.scenes import (
    LAMP_HOLDERS,
    LAMPS,
    Scene,
    all_scenes,
    constants,
    holders,
    instance_counts,
    room_type,
    scene_layout,
)

__all__ = [
    "TASK_TYPES",
    "SPLIT_DIRS",
    "UNSEEN_SCENES",
    "STATE_STEP",
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
    "skipped_steps",
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

STATE_STEP = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "look_at_obj_in_light": "use",
}
"""The command verb a task type's walkthrough must contain (the state change the goal asks for)."""

_STATE_RECEP = {
    "pick_clean_then_place_in_recep": ("Cleanable", "SinkBasin"),
    "pick_heat_then_place_in_recep": ("Heatable", "Microwave"),
    "pick_cool_then_place_in_recep": ("Coolable", "Fridge"),
}
_REQUIRED_RTYPES = ("SinkBasin", "Microwave", "Fridge")  # named by the domain's actions
_REQUIRED_OTYPES = ("Knife", "ButterKnife")


def _start_holders(task_type: str, obj: str, recep: str, rtypes) -> list[str]:
    """Receptacle types a target may start in: allowed for it, not the goal receptacle, and not the
    fridge for a cooling task (ALFRED makes the target type cool there, so cooling would be done)."""
    out = holders(obj, rtypes)
    if task_type != "look_at_obj_in_light":
        out = [r for r in out if r != recep]
    if task_type == "pick_cool_then_place_in_recep":
        out = [r for r in out if r != "Fridge"]
    return out


def feasible_targets(scene: int, task_type: str) -> list[tuple[str, str]]:
    """``(object type, recep-or-toggle type)`` pairs ``task_type`` can use in ``scene`` (sorted)."""
    c = constants()
    if room_type(scene) not in c.GOALS_VALID[task_type]:
        return []
    s = scene_layout(scene)
    out = []
    for obj in s.pickupable:
        if task_type == "look_at_obj_in_light":
            out += [(obj, lamp) for lamp in s.lamps]
            continue
        receps = holders(obj, s.rtypes)
        if task_type in _STATE_RECEP:
            group, needed = _STATE_RECEP[task_type]
            if obj not in c.VAL_ACTION_OBJECTS[group] or needed not in s.rtypes:
                continue
            receps = [r for r in receps if r != needed]
        out += [(obj, r) for r in receps if _start_holders(task_type, obj, r, s.rtypes)]
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
    """(object id, type, receptacle id) for every object instance; no part of the goal holds at start."""
    by_type: dict[str, list[str]] = {}
    for rid, rtype in s.receptacles:
        by_type.setdefault(rtype, []).append(rid)
    placed = []
    for obj, count in instance_counts(s, p.obj, p.task_type, rng).items():
        allowed = (
            _start_holders(p.task_type, obj, p.recep, s.rtypes) if obj == p.obj else holders(obj, s.rtypes)
        )
        for _ in range(count):
            rid = rng.choice(by_type[rng.choice(allowed)])
            placed.append((f"{obj}|{_coords(rng)}", obj, rid))
    lamp_spots = [rid for rid, rt in s.receptacles if rt in LAMP_HOLDERS]
    for lamp in s.lamps:  # one lamp of each type the scene has, off
        placed.append((f"{lamp}|{_coords(rng)}", lamp, rng.choice(lamp_spots)))
    return placed


def task_text(p: GameParams, human_anns_prob: float = 0.0) -> str:
    """The game's task (see :func:`goals.goal_text`): the template, e.g. "put a knife in countertop",
    or with ``human_anns_prob`` one of the game's rule-made annotations."""
    return goals.goal_text(p.task_type, p.obj, p.recep, p.seed, human_anns_prob)


def build_problem(p: GameParams, relevant_only: bool = False) -> str:
    """The PDDL problem text of game ``p`` (deterministic).

    With ``relevant_only`` the problem keeps only the goal's objects (target instances, the lamp) and
    every receptacle: the planning problem ALFRED's own planner solves. In this domain other objects
    never block a plan (receptacles have no capacity; the agent only picks up targets), so a plan of
    the relevant problem is a plan of the game, and its search is far smaller.
    """
    c = constants()
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
        init.append(f"(toggleable {o})" if otype in LAMPS else f"(pickupable {o})")
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
        if rid in fridge and otype == p.obj and otype in acts["Coolable"]:
            init.append(f"(isCool {o})")  # ALFRED's rule: the target type starts cool in the fridge
    name = f"plan_{p.task_type}_{p.scene}_{p.seed}"
    return (
        f"(define (problem {name})\n(:domain alfred)\n(:objects\n"
        + "\n".join(objs)
        + "\n)\n(:init\n"
        + "\n".join(init)
        + "\n)\n"
        + goals.goal_pddl(p.task_type, p.obj, p.recep).strip()
        + "\n"
    )


@lru_cache(maxsize=4)
def _asset(name: str) -> str:
    import alfworld

    with open(os.path.join(os.path.dirname(alfworld.__file__), "data", name)) as f:
        return f.read()


def game_json(
    p: GameParams,
    walkthrough: list[str] | None = None,
    problem: str | None = None,
    human_anns_prob: float = 0.0,
) -> dict:
    """The ``game.tw-pddl`` content of ``p`` (domain, grammar with the task, problem, solvable, plan);
    ``human_anns_prob`` as ALFWorld's ``goal_desc_human_anns_prob`` (see :func:`task_text`)."""
    return {
        "pddl_domain": _asset("alfred.pddl"),
        "grammar": _asset("alfred.twl2").replace("UNKNOWN GOAL", task_text(p, human_anns_prob)),
        "pddl_problem": problem if problem is not None else build_problem(p),
        "solvable": True,
        "walkthrough": list(walkthrough or []),
    }


def traj_data(p: GameParams) -> dict:
    """The ``traj_data.json`` fields ALFWorld's tools read: task type and PDDL parameters
    (``AlfredTWEnv``, the handcoded expert, templated goals), ``turk_annotations`` (goals from
    annotations; here rule-made, see :mod:`.goals`) and the scene."""
    look = p.task_type == "look_at_obj_in_light"
    return {
        "task_id": f"trial_s{p.seed}",
        "task_type": p.task_type,
        "scene": {"floor_plan": f"FloorPlan{p.scene}", "scene_num": p.scene, "random_seed": p.seed},
        "pddl_params": {
            "object_target": p.obj,
            "parent_target": "" if look else p.recep,
            "toggle_target": p.recep if look else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
        "turk_annotations": {"anns": goals.annotations(p.task_type, p.obj, p.recep, p.seed)},
    }


def skipped_steps(task_type: str, walkthrough: list[str]) -> list[str]:
    """What a walkthrough leaves out of its task: the state change (``STATE_STEP``) or a placement
    (two for ``pick_two_obj_and_place``); ``[]`` for a walkthrough that does the whole task."""
    verbs = [cmd.split(" ", 1)[0] for cmd in walkthrough]
    out = []
    if task_type in STATE_STEP and STATE_STEP[task_type] not in verbs:
        out.append(STATE_STEP[task_type])
    need = {"look_at_obj_in_light": 0, "pick_two_obj_and_place": 2}.get(task_type, 1)
    if verbs.count("move") < need:
        out.append("move")
    if verbs.count("take") < max(need, 1):
        out.append("take")
    return out


def problem_sha1(problem: str) -> str:
    """Short content hash stored in the manifest to detect a drifted generator."""
    return hashlib.sha1(problem.encode()).hexdigest()[:16]
