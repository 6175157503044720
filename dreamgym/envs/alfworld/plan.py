"""Solve an ALFWorld game with fast-downward and render the plan as ALFWorld commands.

Used at generation time only (``scripts/make_alfworld_games.py``): the optimised PDDL->SAS translation
(the one TextWorld's ``replan`` searches) is solved with ``solve_sas`` and each operator is rendered
with the command templates of ``alfred.twl2`` and the display names ALFWorld's ``AlfredDemangler``
gives ("drawer 3"). That skips TextWorld's full game load (grammar parse and a second translation);
the tests and the benchmark replay the stored walkthroughs in the engine.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

__all__ = ["COMMAND_TEMPLATES", "display_names", "plan_to_commands", "problem_objects", "solve"]

COMMAND_TEMPLATES = {
    "gotolocation": "go to {r}",
    "openobject": "open {r}",
    "closeobject": "close {r}",
    "pickupobject": "take {o} from {r}",
    "putobject": "move {o} to {r}",
    "cleanobject": "clean {o} with {r}",
    "heatobject": "heat {o} with {r}",
    "coolobject": "cool {o} with {r}",
    "toggleobject": "use {o}",
    "sliceobject": "slice {co} with {ko}",
    "examinereceptacle": "examine {r}",
    "examineobject": "examine {o}",
    "look": "look",
    "inventory": "inventory",
    "help": "help",
}
"""PDDL action -> command template, as in ``alfworld/data/alfred.twl2`` (go to uses the receptacle)."""


def display_names(object_names: list[str]) -> dict[str, str]:
    """PDDL object name -> ALFWorld display name ("cabinet_bar_..." -> "cabinet 2")."""
    from alfworld.agents.utils.misc import Demangler

    infos = {n: SimpleNamespace(id=n) for n in object_names}
    dm = Demangler(game_infos=infos)
    return {n: dm.demangle_alfred_name(n).strip() if "_bar_" in n else n for n in object_names}


def plan_to_commands(plan: list[str], task, names: dict[str, str]) -> list[str]:
    """Render fast-downward operator names (``"pickupobject agent1 l o r"``) as commands."""
    actions = {a.name: a for a in task.actions}
    out = []
    for op in plan:
        name, *args = op.split()
        params = [p.name.lstrip("?") for p in actions[name].parameters]
        values = {p: names.get(a, a) for p, a in zip(params, args, strict=True)}
        out.append(COMMAND_TEMPLATES[name].format(**values))
    return out


def problem_objects(problem: str) -> list[str]:
    """Object names declared in a PDDL problem's ``(:objects ...)`` section (lower-cased, as the planner)."""
    section = problem.split("(:objects", 1)[1].split(")", 1)[0]
    return [line.split(" - ")[0].strip().lower() for line in section.splitlines() if " - " in line]


def solve(game: dict, planning_problem: str | None = None) -> tuple[list[str], dict]:
    """Plan for ``game`` (a ``game.tw-pddl`` dict); returns (commands or [], timings in seconds).

    ``planning_problem`` (e.g. the game restricted to its relevant objects) is searched instead of the
    game's problem; display names always come from the game's full object list.
    """
    import fast_downward

    argv = list(sys.argv)
    t0 = time.perf_counter()
    problem = planning_problem or game["pddl_problem"]
    try:
        task, sas = fast_downward.pddl2sas(game["pddl_domain"], problem, optimize=True)
    finally:
        sys.argv = argv  # pddl2sas overwrites sys.argv
    t1 = time.perf_counter()
    lib = fast_downward.load_lib()
    try:
        solved = lib.solve_sas(sas.encode("utf-8"), False)
        ops = []
        if solved:
            ops = (fast_downward.Operator * lib.get_last_plan_length())()
            lib.get_last_plan(ops)
    finally:
        fast_downward.close_lib(lib)
    t2 = time.perf_counter()
    times = {"translate_s": round(t1 - t0, 3), "plan_s": round(t2 - t1, 3)}
    if not solved:
        return [], times
    names = display_names(problem_objects(game["pddl_problem"]))
    return plan_to_commands([op.name for op in ops], task, names), times
