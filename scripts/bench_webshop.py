"""Benchmark the WebShop env: expert/random success on the test split and env throughput.

Prints a markdown table. Run::

    HF_HUB_OFFLINE=1 python scripts/bench_webshop.py            # all test goals
    HF_HUB_OFFLINE=1 python scripts/bench_webshop.py --n 100     # a quicker sample

Throughput is measured with the random policy's actions replayed through ``env.step`` (policy time
excluded), single (B=1) and batched (B=16).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dreamgym.collect import collect_trajectories  # noqa: E402
from dreamgym.envs import WebShopEnv  # noqa: E402


def _success(policy: str, n: int, seed: int) -> tuple[float, float, float, int]:
    kw = {"n_expert": n, "n_random": 0} if policy == "expert" else {"n_expert": 0, "n_random": n}
    t0 = time.perf_counter()
    trajs = collect_trajectories("webshop", "test", teacher=False, batch_size=16, seed=seed, **kw)
    dt = time.perf_counter() - t0
    steps = sum(len(t.transitions) for t in trajs)
    return (
        float(np.mean([t.success for t in trajs])),
        float(np.mean([t.score for t in trajs])),
        steps / dt,
        len(trajs),
    )


def _throughput(batch: int, n_steps: int, seed: int) -> float:
    from tensordict import TensorDict

    from dreamgym.agents import RandomAgent

    env = WebShopEnv(batch_size=[batch], split="test", seed=seed)
    agents = [RandomAgent(seed + i) for i in range(batch)]
    env.reset()
    elapsed, steps = 0.0, 0
    while steps < n_steps:
        acts = [agents[i].act(env.current(i), {}) for i in range(batch)]
        step_td = TensorDict({"action": acts}, batch_size=[batch])
        t0 = time.perf_counter()
        out = env.step(step_td)["next"]
        done = out["done"].reshape(-1)
        if done.any():
            env.reset(TensorDict({"_reset": done.reshape(batch, 1)}, batch_size=[batch]))
        elapsed += time.perf_counter() - t0
        steps += batch
    return steps / elapsed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=0, help="test goals per policy (0: all test goals)")
    ap.add_argument("--steps", type=int, default=2000, help="env steps per throughput measurement")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    env = WebShopEnv(batch_size=[1], split="test")
    build = time.perf_counter() - t0
    n = args.n or env.num_tasks()
    rows = []
    for policy in ("expert", "random"):
        succ, score, sps, k = _success(policy, n, args.seed)
        rows.append((f"{policy} success (test, {k} goals)", f"{succ:.3f}"))
        rows.append((f"{policy} mean score (test)", f"{score:.3f}"))
        rows.append((f"{policy} collection steps/s (B=16, incl. agent)", f"{sps:.0f}"))
    for b in (1, 16):
        rows.append((f"env steps/s (B={b}, random actions)", f"{_throughput(b, args.steps, args.seed):.0f}"))
    rows.append(("first env construction (load + index), s", f"{build:.2f}"))
    print("| metric | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
