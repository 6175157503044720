"""Where an RL policy's gain lives: the same policies played directly in the real WebShop env on the train tasks the
synthetic env trained on and on held-out test tasks, sampled and greedy, against their warm start.

Issue 59's question after the long suite: grounded DreamGym GRPO's episodes, replayed in the real env, succeed more
often than the warm start's on the synthetic env's own train tasks, while held-out (greedy) it stays at the warm
start's level. Is that a gain on the tasks it trained on that does not generalise, or sharper sampling (the held-out
figure is greedy, the replay sampled)? This plays each policy in the real env (no synthetic step) on

- ``train_sampled``: the closed-loop file's train tasks, ``--group`` sampled episodes each (as RL samples);
- ``train_greedy``: the same tasks, one greedy episode each;
- ``test_sampled``: the first ``--test-tasks`` held-out test tasks, one sampled episode each;

and compares each policy's per-task success with the first (the warm start): seed-mean per task, two-sided exact sign
test whose null lets any of a task's episodes be the warm start's (:func:`dreamgym.stats.exchangeable_sign_test_by_task`). Held-out greedy success is the suite's own record (not replayed here)::

    python scripts/policy_generalization.py --tasks-from benchmarks/results/closed_loop_webshop_long_suite_env.json \\
        --policy warm_start=artifacts/webshop_long/policy_sft \\
        dreamgym_s0=artifacts/benchmark_webshop_long_rl/dreamgym_grpo_search_judge_wave128_score_lr5e-4/s0/policy ... \\
        --out benchmarks/results/generalization_webshop_long.json
    python scripts/policy_generalization.py --report benchmarks/results/generalization_webshop_long.json [--arms]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.stats import exchangeable_sign_test_by_task

CONDITIONS = ("train_sampled", "train_greedy", "test_sampled")


def _train_tasks(path: str) -> list[str]:
    """The train task ids of a closed-loop result file, in its order (each once)."""
    modes = json.loads(Path(path).read_text())["modes"]
    episodes = next(iter(modes.values()))["episodes"]
    return list(dict.fromkeys(e["task_id"] for e in episodes))


def play(policy: str, condition: str, train_ids: list[str], args) -> dict[str, list[float]]:
    """Task id -> real successes of ``policy``'s episodes under ``condition``."""
    import torch

    from dreamgym.collect import collect_policy_trajectories
    from dreamgym.envs.registry import make_env
    from dreamgym.rl.collector import collector_from_config

    split = "test" if condition == "test_sampled" else "train"
    if split == "train":
        env = make_env("webshop", split="train", batch_size=1)
        try:
            indices = [env.task_index_of(t) for t in train_ids]
        finally:
            env.close()
        if None in indices:
            raise SystemExit(f"error: --tasks-from holds task ids the real train split lacks: {train_ids}")
        group = args.group if condition == "train_sampled" else 1
        indices = [i for i in indices for _ in range(group)]
    else:
        indices = list(range(args.test_tasks))
    torch.manual_seed(args.seed)
    trajs, _ = collect_policy_trajectories(
        policy, "webshop", split, indices, collector_from_config(args.rl_config),
        greedy=condition == "train_greedy", teacher=False, batch_size=args.batch, max_steps=args.max_steps,
    )  # fmt: skip
    out: dict[str, list[float]] = defaultdict(list)
    for t in trajs:
        out[t.task_id].append(float(t.success))
    return dict(out)


def arms(runs: dict) -> dict:
    """Policies named ``<arm>_s<seed>`` pooled per arm: each task's episodes of every seed (so the sign test below
    compares each task's seed-mean success), beside the policies themselves."""
    pooled: dict = {}
    for name, by_cond in runs.items():
        arm, _, seed = name.rpartition("_s")
        if not (arm and seed.isdigit()):
            continue
        for cond, per_task in by_cond.items():
            into = pooled.setdefault(f"{arm} (seeds pooled)", {}).setdefault(cond, {})
            for task, successes in per_task.items():
                into.setdefault(task, []).extend(successes)
    return pooled


def compare(runs: dict, base: str) -> list[dict]:
    """Per policy (and per arm, seeds pooled) and condition: success, and the sign test of each task's mean
    success against ``base``'s, its null the task's episodes exchangeable
    (:func:`dreamgym.stats.exchangeable_sign_test_by_task`)."""
    rows = []
    for name, by_cond in {**runs, **arms(runs)}.items():
        for cond, per_task in by_cond.items():
            ref = runs[base][cond]
            tasks = sorted(ref)
            mine = [sum(per_task[t]) / len(per_task[t]) for t in tasks]
            # the null lets any of a task's episodes be the base's: pooled seeds play more episodes a task
            # than the base, and the Binomial null would read their mean as "higher" on hard tasks
            test = exchangeable_sign_test_by_task([(per_task[t], ref[t]) for t in tasks])
            rows.append({"policy": name, "condition": cond, "tasks": len(tasks),
                         "episodes": sum(len(v) for v in per_task.values()), "success": sum(mine) / len(mine),
                         "vs": base, "higher": int(test["higher_a"]), "lower": int(test["higher_b"]),
                         "p_two_sided": test["p_two_sided"]})  # fmt: skip
    return rows


def report(path: str) -> str:
    data = json.loads(Path(path).read_text())
    base = data["base"]
    lines = [
        f"| policy | condition | tasks | episodes | success | vs {base}: higher / lower, p (two-sided exact sign test, "
        "per-task mean) |",
        "|---|---|---|---|---|---|",
    ]
    for r in compare(data["runs"], base):
        vs = "" if r["policy"] == base else f"{r['higher']} / {r['lower']}, p = {r['p_two_sided']:.3g}"
        lines.append(
            f"| {r['policy']} | {r['condition']} | {r['tasks']} | {r['episodes']} | {r['success']:.3f} | {vs} |"
        )
    return "\n".join(lines)


def arm_table(path: str) -> str:
    """The base policy and each arm (seeds pooled), a column per condition: success (higher / lower, p), as
    BENCHMARKS.md quotes it."""
    data = json.loads(Path(path).read_text())
    base = data["base"]
    rows = [
        r
        for r in compare(data["runs"], base)
        if r["policy"] == base or r["policy"].endswith("(seeds pooled)")
    ]
    conds = [c for c in CONDITIONS if any(r["condition"] == c for r in rows)]
    lines = [f"| policy | {' | '.join(conds)} |", "|---|" + "---|" * len(conds)]
    for name in dict.fromkeys(r["policy"] for r in rows):
        cells = []
        for cond in conds:
            r = next((r for r in rows if r["policy"] == name and r["condition"] == cond), None)
            vs = (
                ""
                if r is None or name == base
                else f" ({r['higher']} / {r['lower']}, p = {r['p_two_sided']:.2g})"
            )
            cells.append("" if r is None else f"{r['success']:.3f}{vs}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-from", help="a closed_loop_fidelity.py result file: its train tasks")
    ap.add_argument(
        "--policy", nargs="+", default=[], help="name=path of saved policies; the first is the base"
    )
    ap.add_argument("--rl-config", default="configs/webshop_grpo.yaml", help="the collector's config")
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--test-tasks", type=int, default=200)
    ap.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="result JSON (resumable: policies and conditions already in it are kept)")
    ap.add_argument("--report", help="print the table of a result file and exit")
    ap.add_argument(
        "--arms", action="store_true", help="with --report: the per-arm table BENCHMARKS.md quotes"
    )
    args = ap.parse_args(argv)
    if args.report:
        print(arm_table(args.report) if args.arms else report(args.report))
        return
    if not (args.tasks_from and args.policy and args.out):
        ap.error("--tasks-from, --policy and --out are required (or --report FILE)")
    pairs = [p.split("=", 1) for p in args.policy]
    if any(len(p) != 2 for p in pairs):
        ap.error(f"--policy takes name=path, got {args.policy}")
    train_ids = _train_tasks(args.tasks_from)
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"base": pairs[0][0], "runs": {}, "timing_s": {}}
    for name, path in pairs:
        for cond in args.conditions:
            if cond in data["runs"].get(name, {}):
                continue
            t0 = time.perf_counter()
            data["runs"].setdefault(name, {})[cond] = play(path, cond, train_ids, args)
            data["timing_s"][f"{name}/{cond}"] = round(time.perf_counter() - t0, 1)
            data["_meta"] = result_meta("scripts/policy_generalization.py", argv, ignore=[out])
            write_result(out, data)  # after each (policy, condition): a kill loses one at most
            print(f"[generalization] {name} {cond} done", flush=True)
    print(report(str(out)))


if __name__ == "__main__":
    main()
