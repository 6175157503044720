"""Per split and task type statistics of an ALFWorld game manifest, as a JSON file.

Usage::

    python scripts/alfworld_games_report.py --per-type 10 --out benchmarks/results/alfworld_games.json

From the manifest alone (every game): games, walkthrough length (mean, min, max), games whose
walkthrough skips part of the task (``trivial``: :func:`gen.skipped_steps`, e.g. a cooling task
solved without cooling), object instances, object types and receptacles per scene, and how many
actions back the step that decides the reward lies from the winning action (the cooling, heating or
cleaning; the first placement of a pick-two task; the pick-up of a look task): ``decisive_back`` max
and the share of games where it is within ``--history-window`` (the experience model's prompt shows
that many previous actions). Played in the engine (``--per-type`` games per split and type, the first
ones in manifest order): the walkthrough expert's and a uniform random policy's success in
``--max-steps`` steps (one episode each, random seed ``--seed`` + game index), and the visible-text
searcher's (:mod:`dreamgym.envs.alfworld.searcher`: it knows the goal, not where anything is).
``--splits`` plays only those splits (the manifest columns still cover every game).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path


def _parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=None, help="default: the bundled manifest")
    ap.add_argument("--per-type", type=int, default=10, help="games per split and type played in the engine")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--splits", nargs="+", default=None, help="play only these splits (default: every split)")
    ap.add_argument("--history-window", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None, help="also write the table as Markdown here")
    return ap.parse_args(argv)


def decisive_back(task_type: str, walkthrough: list[str]) -> int:
    """Actions between the earlier step the reward depends on and the last (winning) action.

    The winning action itself shows which object goes where (ALFWorld admits ``move X to Y`` only
    while X is held), so a simple placement needs nothing earlier (0). The others need the state change
    (``clean``/``heat``/``cool``), the pick-up before ``use`` of a look task, or the first placement of
    a pick-two task.
    """
    verbs = [c.split(" ", 1)[0] for c in walkthrough]
    key = {
        "pick_and_place_simple": None,
        "look_at_obj_in_light": "take",
        "pick_two_obj_and_place": "move",
        "pick_clean_then_place_in_recep": "clean",
        "pick_heat_then_place_in_recep": "heat",
        "pick_cool_then_place_in_recep": "cool",
    }[task_type]
    if key is None or key not in verbs:
        return 0
    idx = verbs.index(key) if key == "move" else len(verbs) - 1 - verbs[::-1].index(key)
    return len(verbs) - 1 - idx


def scene_stats(problem: str) -> tuple[int, int, int]:
    """(object instances, object types, receptacles) of a PDDL problem."""
    init = problem.split("(:init", 1)[1]
    types = re.findall(r"\(objectType \S+ (\S+)\)", init)
    return len(types), len(set(types)), len(re.findall(r"\(receptacleType ", init))


def markdown(table: dict) -> str:
    """The per split and type table as Markdown rows."""
    cols = ("games", "trivial", "walkthrough (mean, min-max)", "objects / types / receptacles",
            "decisive step back (max)", "played", "expert", "random", "searcher")  # fmt: skip
    lines = ["| split | task type | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for split, types in table.items():
        for task_type, r in types.items():
            lines.append(
                f"| {split} | {task_type} | {r['games']} | {r['trivial']} | {r['walkthrough_len_mean']:.1f}, "
                f"{r['walkthrough_len_min']}-{r['walkthrough_len_max']} | {r['objects_mean']:.0f} / "
                f"{r['object_types_mean']:.0f} / {r['receptacles_mean']:.0f} | {r['decisive_back_max']} | "
                f"{r['played']} | {_cell(r['expert_success'])} | {_cell(r['random_success'])} | "
                f"{_cell(r.get('searcher_success'))} |"
            )
    return "\n".join(lines) + "\n"


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def _play(env, task: int, agent, max_steps: int) -> bool:
    import torch
    from tensordict import TensorDict

    td = env.reset(TensorDict({"task_index": torch.tensor([[task]])}, batch_size=[1]))
    for _ in range(max_steps):
        td["action"] = [agent.act(env.current(0), env.step_info(0))]
        td = env.step(td)["next"]
        if td["done"].item():
            return bool(td["success"].item())
    return False


def main(argv=None) -> dict:
    args = _parse_args(argv)
    from dreamgym.agents import RandomAgent
    from dreamgym.envs.alfworld import gen
    from dreamgym.envs.alfworld.env import ALFWorldEnv
    from dreamgym.envs.alfworld.expert import ALFWorldExpert
    from dreamgym.envs.alfworld.games import MANIFEST, load_manifest
    from dreamgym.envs.alfworld.searcher import ALFWorldSearcher

    manifest = args.manifest or MANIFEST
    data = load_manifest(manifest)
    rows: dict = defaultdict(lambda: defaultdict(list))
    for g in data["games"]:
        p = gen.GameParams(**{k: g[k] for k in ("split", "task_type", "scene", "obj", "recep", "seed")})
        r = rows[(g["split"], g["task_type"])]
        r["length"].append(len(g["walkthrough"]))
        r["trivial"].append(bool(gen.skipped_steps(g["task_type"], g["walkthrough"])))
        r["back"].append(decisive_back(g["task_type"], g["walkthrough"]))
        n_obj, n_types, n_rec = scene_stats(gen.build_problem(p))
        r["objects"].append(n_obj)
        r["object_types"].append(n_types)
        r["receptacles"].append(n_rec)
    for split in args.splits or gen.SPLIT_DIRS:
        env = ALFWorldEnv(batch_size=[1], split=split, max_steps=args.max_steps, manifest=manifest,
                          cache_dir=args.cache_dir)  # fmt: skip
        seen: dict = defaultdict(int)
        for i, rec in enumerate(env.games.games(split)):
            if seen[rec.task_type] >= args.per_type:
                continue
            seen[rec.task_type] += 1
            expert = ALFWorldExpert()
            expert.reset(args.seed)
            rows[(split, rec.task_type)]["expert"].append(_play(env, i, expert, args.max_steps))
            rows[(split, rec.task_type)]["random"].append(
                _play(env, i, RandomAgent(seed=args.seed + i), args.max_steps)
            )
            rows[(split, rec.task_type)]["searcher"].append(_play(env, i, ALFWorldSearcher(), args.max_steps))
    mean = lambda xs: round(statistics.mean(xs), 3) if xs else None  # noqa: E731
    table = {}
    for (split, task_type), r in sorted(rows.items()):
        table.setdefault(split, {})[task_type] = {
            "games": len(r["length"]),
            "walkthrough_len_mean": mean(r["length"]),
            "walkthrough_len_min": min(r["length"]),
            "walkthrough_len_max": max(r["length"]),
            "trivial": sum(r["trivial"]),
            "trivial_share": mean([float(x) for x in r["trivial"]]),
            "objects_mean": mean(r["objects"]),
            "object_types_mean": mean(r["object_types"]),
            "receptacles_mean": mean(r["receptacles"]),
            "decisive_back_max": max(r["back"]),
            "decisive_in_window_share": mean([float(b <= args.history_window) for b in r["back"]]),
            "played": len(r["expert"]),
            "expert_success": mean([float(x) for x in r["expert"]]),
            "random_success": mean([float(x) for x in r["random"]]),
            "searcher_success": mean([float(x) for x in r["searcher"]]),
        }
    from dreamgym.provenance import result_meta, write_result

    report = {
        "_meta": result_meta("scripts/alfworld_games_report.py", argv),
        "manifest": str(manifest),
        "manifest_meta": data.get("meta", {}),
        "table": table,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        write_result(args.out, report, indent=2)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(table))
    return report


if __name__ == "__main__":
    main()
