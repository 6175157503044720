"""The web env's cost and its scripted agents: seconds per real browser reset and step vs per synthetic
step, and expert / near-miss / random success per task type on the test split.

    python scripts/bench_web.py --seeds 10 --timing-seeds 3 --out benchmarks/results/web_env.json
    python scripts/bench_web.py --experience artifacts/web/experience_model ...   # a trained web model

Success: every test task (``--seeds`` unseen seeds of each of the 30 test types, held-out types
included) played once by each agent (``dreamgym.collect``, 2 browser slots, step limit 10). Timing, one
slot: ``--timing-seeds`` episodes per type played by the expert, each ``env.reset`` and ``env.step``
timed alone; a reset that changes the task type loads its page (``reset_new_page``), one that keeps it
reuses the page (``reset_same_page``). The synthetic step is ``env.step`` of the synthetic env on the web
task pool: a trained experience model with ``--experience``, else the untrained ``tiny`` stand-in (the
loop's overhead only, not a world model's generation cost).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from dreamgym.agents import make_agent  # noqa: E402
from dreamgym.collect import collect_trajectories  # noqa: E402
from dreamgym.envs.base import as_text_list  # noqa: E402
from dreamgym.envs.web.tasks import HELD_OUT_TYPES  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402


def success_by_type(policy: str, seeds: int, seed: int) -> dict[str, dict]:
    """Success rate and mean steps of ``policy`` per test task type (each task once)."""
    from dreamgym.envs.web.tasks import suite_tasks

    n = len(suite_tasks("test", seeds))
    n_expert, n_random = (n, 0) if policy == "expert" else (0, n) if policy == "random" else (0, 0)
    mix = None if policy in ("expert", "random") else {policy: n}
    trajs = collect_trajectories("web", "test", n_expert, n_random, seed=seed, teacher=False, batch_size=2,
                                 env_kwargs={"test_seeds": seeds}, mix=mix)  # fmt: skip
    by: dict[str, list] = defaultdict(list)
    for t in trajs:
        by[t.task_id.split("/")[2]].append(t)
    return {k: {"episodes": len(v), "success": round(sum(t.success for t in v) / len(v), 3),
                "steps_mean": round(statistics.mean(len(t.transitions) for t in v), 2),
                "held_out": k in HELD_OUT_TYPES} for k, v in sorted(by.items())}  # fmt: skip


def _stats(xs: list[float]) -> dict:
    return {"n": len(xs), "mean_s": round(statistics.mean(xs), 4), "median_s": round(statistics.median(xs), 4),
            "max_s": round(max(xs), 4)}  # fmt: skip


def real_timing(seeds: int) -> dict:
    """Seconds per reset (new page / same page), per step and for the first browser start (one slot)."""
    from dreamgym.envs.web.env import WebEnv

    env = WebEnv(batch_size=[1], split="test", test_seeds=seeds, threads=1)
    tasks = sorted(range(env.num_tasks()), key=lambda i: (env.tasks["test"][i].task_type, i))  # type-major
    times: dict[str, list[float]] = defaultdict(list)
    last_type = None
    try:
        for i in tasks:
            task = env.tasks["test"][i]
            t0 = time.perf_counter()
            td = env.reset(TensorDict({"task_index": torch.tensor([[i]])}, batch_size=[1]))
            dt = time.perf_counter() - t0
            key = (
                "first_start"
                if last_type is None
                else "reset_same_page"
                if task.task_type == last_type
                else "reset_new_page"
            )
            times[key].append(dt)
            last_type = task.task_type
            agent = make_agent("expert", "web", env, seed=i)
            for _ in range(env.max_steps):
                obs = env.current(0)
                td["action"] = [agent.act(obs, env.step_info(0))]
                t0 = time.perf_counter()
                out = env.step(td)["next"]
                times["step"].append(time.perf_counter() - t0)
                td = out
                if out["done"].item():
                    break
    finally:
        env.close()
    return {k: _stats(v) for k, v in times.items()}


def synthetic_timing(experience: str | None, steps: int, seed: int) -> dict:
    """Seconds per ``env.step`` of the synthetic env (batch 1) on web tasks with expert-like actions."""
    from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask

    trajs = collect_trajectories("web", "train", 4, 0, seed=seed, teacher=False, batch_size=1,
                                 env_kwargs={"train_seeds": 1})  # fmt: skip
    tasks = [SyntheticTask(t.task_id, t.instruction, t.transitions[0].state, t.transitions[0].available_actions)
             for t in trajs]  # fmt: skip
    actions = {t.task_id: [tr.action for tr in t.transitions] for t in trajs}
    if experience:
        env = SyntheticEnv.from_checkpoint(experience, real_env="web", tasks=tasks, batch_size=[1], seed=seed)
    else:
        env = SyntheticEnv(None, tasks, real_env="web", batch_size=[1], seed=seed)
    times: list[float] = []
    while len(times) < steps:
        td = env.reset()
        for a in actions[as_text_list(td["task_id"])[0]]:
            td["action"] = [a]
            t0 = time.perf_counter()
            td = env.step(td)["next"]
            times.append(time.perf_counter() - t0)
            if td["done"].item() or len(times) >= steps:
                break
    return {"experience": experience or "untrained tiny stand-in (loop overhead only)", "step": _stats(times)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="test seeds per task type for the success table")
    ap.add_argument("--timing-seeds", type=int, default=3, help="expert episodes per type for the timing")
    ap.add_argument("--experience", default=None, help="a web experience-model directory (synthetic timing)")
    ap.add_argument("--synthetic-steps", type=int, default=20)
    ap.add_argument("--policies", nargs="+", default=["expert", "near_miss", "random"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="JSON result file (benchmarks/results/web_env.json)")
    args = ap.parse_args(argv)
    result: dict = {"_meta": result_meta("scripts/bench_web.py", argv)}
    result["real"] = real_timing(args.timing_seeds)
    print(json.dumps({"real": result["real"]}), flush=True)
    result["synthetic"] = synthetic_timing(args.experience, args.synthetic_steps, args.seed)
    print(json.dumps({"synthetic": result["synthetic"]}), flush=True)
    result["success"] = {}
    for policy in args.policies:
        t0 = time.perf_counter()
        table = success_by_type(policy, args.seeds, args.seed)
        eps = sum(r["episodes"] for r in table.values())
        overall = sum(r["success"] * r["episodes"] for r in table.values()) / eps
        result["success"][policy] = {"overall": round(overall, 3), "episodes": eps,
                                     "seconds": round(time.perf_counter() - t0, 1), "by_type": table}  # fmt: skip
        print(f"{policy}: success {overall:.3f} over {eps} test episodes", flush=True)
    if args.out:
        write_result(args.out, result, indent=1)
    return result


if __name__ == "__main__":
    main()
