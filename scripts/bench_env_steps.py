"""Env steps per second by batch size: the real envs and the synthetic env (the experience model).

    python scripts/bench_env_steps.py --batches 1 4 16 --experience artifacts/webshop_long/experience_model_onpolicy \
        --out benchmarks/results/env_steps_webshop.json

Each measurement times ``env.step`` only (the actions are drawn uniformly from the state's listed
``available_actions`` with a fixed seed beforehand; finished slots are reset, not timed). The synthetic
env runs its default decoding (structured, greedy, static KV cache, one batched generation per step) with
retrieval from its buffer and no write-back.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from tensordict import TensorDict

from dreamgym.envs import make_env
from dreamgym.envs.base import as_text_list, text_stack
from dreamgym.lab.provenance import result_meta, write_result


def steps_per_s(env, n_steps: int, seed: int) -> dict:
    """``env.step`` throughput over at least ``n_steps`` transitions of random listed actions."""
    rng = random.Random(seed)
    b = env.batch_size[0]
    td = env.reset()
    elapsed, steps, calls = 0.0, 0, 0
    while steps < n_steps:
        avail = as_text_list(td["available_actions"])
        actions = [rng.choice(list(a)) if len(a) else "noop" for a in avail]
        t0 = time.perf_counter()
        out = env.step(td.set("action", text_stack(actions, env.batch_size)))["next"]
        elapsed += time.perf_counter() - t0
        steps, calls = steps + b, calls + 1
        done = out["done"].reshape(b, 1)
        td = out
        if done.any():
            td = env.reset(
                TensorDict(
                    {"_reset": done, **out.select("done", "terminated", "truncated")},
                    batch_size=env.batch_size,
                )
            )
    return {"batch": b, "steps": steps, "seconds": round(elapsed, 3), "steps_per_s": round(steps / elapsed, 2),
            "ms_per_call": round(elapsed / calls * 1e3, 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", nargs="+", default=["webshop", "alfworld"])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--real-steps", type=int, default=400, help="transitions per real-env measurement")
    ap.add_argument("--experience", default=None, help="an experience-model directory (synthetic env)")
    ap.add_argument("--synthetic-calls", type=int, default=3, help="env.step calls per synthetic measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    result: dict = {"_meta": result_meta("scripts/bench_env_steps.py", argv), "rows": []}
    for name in args.envs:
        for b in args.batches:
            row = {
                "env": name,
                **steps_per_s(
                    make_env(name, batch_size=[b], split="test", seed=args.seed), args.real_steps, args.seed
                ),
            }
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
    if args.experience:
        from dreamgym.envs import SyntheticEnv

        for b in args.batches:
            env = SyntheticEnv.from_checkpoint(args.experience, batch_size=[b], seed=args.seed)
            row = {
                "env": f"synthetic ({Path(args.experience).name})",
                **steps_per_s(env, b * args.synthetic_calls, args.seed),
            }
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
    if args.out:
        write_result(args.out, result, indent=1)
    return result


if __name__ == "__main__":
    main()
