"""RL rollout throughput: episodes per second of the collector (policy generation + env) by wave size.

    python scripts/bench_waves.py --policy artifacts/webshop/policy_sft --waves 8 32 128 \
        --out benchmarks/results/waves_webshop.json
    python scripts/bench_waves.py --policy artifacts/webshop/policy_sft --waves 8 32 128 \
        --experience artifacts/webshop/experience_model_onpolicy --out benchmarks/results/waves_synthetic.json

Each row plays the same ``--episodes`` sampled episodes (``--tasks`` train tasks x the group size that
makes ``--episodes``) with :meth:`~dreamgym.rl.collector.RolloutCollector.collect`, the collector RL uses
(constrained decoding and prompt sizes of ``--config``), in an env of ``wave`` slots: one wave of
``wave`` episodes at a time, and ``gen_batch`` prompts per generation call (``--gen_batch 0``: the wave).
Timed: the whole ``collect`` call (generation, env steps, prompt building), nothing else.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.modeling import LanguageModel
from dreamgym.rl.collector import collector_from_config


def measure(env, collector, model, tokenizer, episodes: int, tasks: int, seed: int) -> dict:
    """One timed ``collect`` of ``episodes`` sampled episodes over ``tasks`` train tasks."""
    group = max(1, episodes // tasks)
    task_ids = torch.randint(
        env.num_tasks(), (tasks,), generator=torch.Generator().manual_seed(seed)
    ).tolist()
    t0 = time.perf_counter()
    coll = collector.collect(env, model, tokenizer, task_ids, group)
    seconds = time.perf_counter() - t0
    n = len(coll.episodes)
    return {
        "episodes": n, "transitions": coll.transitions, "seconds": round(seconds, 2),
        "episodes_per_s": round(n / seconds, 3), "transitions_per_s": round(coll.transitions / seconds, 2),
        "success_rate": round(coll.metrics()["success_rate"], 4), "steps_mean": round(coll.transitions / n, 2),
        "generated_tokens_per_s": round(coll.generated_tokens / seconds, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, help="a saved policy dir (the warm start)")
    ap.add_argument("--config", default="configs/webshop_real_grpo.yaml", help="RL config: its collector")
    ap.add_argument("--env", default="webshop")
    ap.add_argument("--experience", default=None, help="an experience-model dir: measure the synthetic env")
    ap.add_argument("--waves", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument(
        "--gen_batch", type=int, nargs="+", default=[0], help="prompts per generate call; 0: the wave"
    )
    ap.add_argument("--episodes", type=int, default=128)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--max_steps", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    model, tokenizer = LanguageModel(path=args.policy).build()
    model.eval()
    collector = collector_from_config(args.config).use_format_of(args.policy)
    result: dict = {"_meta": result_meta("scripts/bench_waves.py", argv), "rows": []}
    for wave in args.waves:
        for gen_batch in args.gen_batch:
            if args.experience:
                factory = SyntheticEnvFactory(
                    args.experience, args.env, batch_size=wave, max_steps=args.max_steps
                )
            else:
                factory = EnvFactory(args.env, split="train", batch_size=wave, max_steps=args.max_steps)
            collector.gen_batch_size = gen_batch or wave
            row = {"env": "synthetic" if args.experience else args.env, "wave": wave,
                   "gen_batch": collector.gen_batch_size,
                   **measure(factory.build(), collector, model, tokenizer, args.episodes, args.tasks, args.seed)}  # fmt: skip
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
            if args.out:
                write_result(args.out, result, indent=1)
    return result


if __name__ == "__main__":
    main()
