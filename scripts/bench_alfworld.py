"""Benchmark the ALFWorld env: expert and random success per task type, step/reset times, generation cost.

Usage::

    python scripts/bench_alfworld.py --split test --per-type 3 --out artifacts/bench_alfworld.json

For ``--per-type`` games of each task type of ``--split``: the walkthrough expert plays one episode and
a uniform random policy one (``--max-steps``, 50 as ALFWorld). Reported: success per type, the median
and p90 of env step time (one slot, ``env.step``), the first reset of a game (load: grammar parse + PDDL
translation) and a reset of a loaded game, and the generation cost per game (rebuild + write of the
game file here; translation + planning from the manifest's validation records).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path


def _parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="test", help="train | val | test (ALFWorld names accepted)")
    ap.add_argument("--per-type", type=int, default=3, help="games per task type")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the report as JSON here too")
    return ap.parse_args(argv)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 4) if xs else float("nan")


def _episode(env, task: int, agent, max_steps: int, step_times: list[float]) -> bool:
    import torch
    from tensordict import TensorDict

    td = env.reset(TensorDict({"task_index": torch.tensor([[task]])}, batch_size=[1]))
    for _ in range(max_steps):
        td["action"] = [agent.act(env.current(0), env.step_info(0))]
        t = time.perf_counter()
        td = env.step(td)["next"]
        step_times.append(time.perf_counter() - t)
        if td["done"].item():
            return bool(td["success"].item())
    return False


def main(argv=None) -> dict:
    args = _parse_args(argv)  # before TextWorld: fast-downward overwrites sys.argv
    import torch
    from tensordict import TensorDict

    from dreamgym.agents import RandomAgent
    from dreamgym.envs.alfworld import gen
    from dreamgym.envs.alfworld.env import ALFWorldEnv
    from dreamgym.envs.alfworld.expert import ALFWorldExpert
    from dreamgym.envs.alfworld.games import MANIFEST, load_manifest

    env = ALFWorldEnv(batch_size=[1], split=args.split, max_steps=args.max_steps, seed=args.seed)
    games = env.games.games(args.split)
    chosen = defaultdict(list)
    for i, rec in enumerate(games):
        if len(chosen[rec.task_type]) < args.per_type:
            chosen[rec.task_type].append(i)
    expert_ok, random_ok = defaultdict(list), defaultdict(list)
    steps, first_reset, reset = [], [], []
    for task_type in gen.TASK_TYPES:
        for task in chosen[task_type]:
            t = time.perf_counter()
            env.reset(TensorDict({"task_index": torch.tensor([[task]])}, batch_size=[1]))
            first_reset.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.reset(TensorDict({"task_index": torch.tensor([[task]])}, batch_size=[1]))
            reset.append(time.perf_counter() - t)
            expert = ALFWorldExpert()
            expert.reset(args.seed)
            expert_ok[task_type].append(_episode(env, task, expert, args.max_steps, steps))
            rand = RandomAgent(seed=args.seed + task)
            random_ok[task_type].append(_episode(env, task, rand, args.max_steps, steps))
    gen_times = []
    for rec in games[: 2 * len(gen.TASK_TYPES)]:
        if rec.params is not None:
            t = time.perf_counter()
            gen.game_json(rec.params, rec.walkthrough, gen.build_problem(rec.params))
            gen_times.append(time.perf_counter() - t)
    manifest = load_manifest(MANIFEST) if games and games[0].params is not None else {"games": []}
    val = [g.get("validation", {}) for g in manifest["games"]]
    mean = lambda xs: round(statistics.mean(xs), 3) if xs else None  # noqa: E731
    report = {
        "split": args.split,
        "games_in_split": len(games),
        "expert_success": {k: mean([float(x) for x in v]) for k, v in expert_ok.items()},
        "expert_success_all": mean([float(x) for v in expert_ok.values() for x in v]),
        "random_success": {k: mean([float(x) for x in v]) for k, v in random_ok.items()},
        "random_success_all": mean([float(x) for v in random_ok.values() for x in v]),
        "step_s": {"median": _pct(steps, 0.5), "p90": _pct(steps, 0.9), "n": len(steps)},
        "first_reset_s": {"median": _pct(first_reset, 0.5), "p90": _pct(first_reset, 0.9)},
        "reset_loaded_s": {"median": _pct(reset, 0.5), "p90": _pct(reset, 0.9)},
        "generation_s_per_game": {
            "rebuild_game_file_median": _pct(gen_times, 0.5),
            "translate_median": _pct([v["translate_s"] for v in val if "translate_s" in v], 0.5),
            "plan_median": _pct([v["plan_s"] for v in val if "plan_s" in v], 0.5),
            "plan_p90": _pct([v["plan_s"] for v in val if "plan_s" in v], 0.9),
        },
        "manifest_games": {s: sum(g["split"] == s for g in manifest["games"]) for s in gen.SPLIT_DIRS},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
