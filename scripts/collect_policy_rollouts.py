"""Record a trained policy's episodes in a REAL env as schema trajectories (JSONL).

    python scripts/collect_policy_rollouts.py --policy artifacts/webshop/policy_sft --env webshop \\
        --split test --tasks 100 --out runs/rollouts/policy_sft_test.jsonl

Greedy by default (``--sample`` samples at temperature 1), with the prompt format and constrained
decoding of ``--config`` (``configs/webshop_grpo.yaml``). Each transition's ``reasoning`` is written by the env's
rule-based teacher (as in ``python -m dreamgym collect``): the episode's actions are replayed in a fresh
env so the teacher sees the privileged step info (``--no-teacher`` leaves it empty).

Uses: ``scripts/fidelity_report.py --source NAME=<out>`` measures the experience model on the policy's own
(on-policy) transitions, e.g. how often it calls a failed purchase a success, which is what RL in the
synthetic env depends on; on *train* tasks, the output is experience-model SFT data with the failed
purchases that expert data lacks (the paper's replay of fresh interactions).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dreamgym.collect import collect_policy_trajectories
from dreamgym.rl.collector import collector_from_config


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, help="saved policy directory (save_pretrained)")
    ap.add_argument("--env", default="webshop")
    ap.add_argument(
        "--config",
        default="configs/webshop_grpo.yaml",
        help="RL config whose collector (prompt format, decoding constraint) is used",
    )
    ap.add_argument("--split", default="test")
    ap.add_argument("--tasks", type=int, default=100, help="tasks FIRST..FIRST+N-1 of the split")
    ap.add_argument("--first-task", type=int, default=0, help="index of the first task (default 0)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sample", action="store_true", help="sample (temperature 1) instead of greedy")
    ap.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed torch's sampling (another draw with --sample; default: torch's own)",
    )
    ap.add_argument("--free", action="store_true", help="free decoding instead of constrained")
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--no-teacher", action="store_true", help="leave reasoning empty")
    ap.add_argument(
        "--label-with",
        default=None,
        help="a scripted agent (e.g. non_oracle) whose action in each of the policy's states is recorded as "
        "the transition's expert_action (DAgger data for the policy warm start)",
    )
    ap.add_argument(
        "--dtype", default=None, help="load the policy in this dtype (e.g. bfloat16; default: as saved)"
    )
    args = ap.parse_args(argv)
    if args.seed is not None:
        import torch

        torch.manual_seed(args.seed)
    collector = collector_from_config(args.config)
    if args.free:
        collector.constrained = False
    tasks = list(range(args.first_task, args.first_task + args.tasks))
    try:
        trajs, metrics = collect_policy_trajectories(
            args.policy, args.env, args.split, tasks, collector, greedy=not args.sample,
            teacher=not args.no_teacher, batch_size=args.batch_size, max_steps=args.max_steps, out=args.out, dtype=args.dtype,
            label_with=args.label_with,
        )  # fmt: skip
    except FileNotFoundError as e:
        ap.error(str(e))
    n = len(trajs)
    print(f"wrote {n} trajectories to {args.out}; {metrics}")
    return metrics


if __name__ == "__main__":
    main()
