"""Paired comparison of two policies' real episodes on the same held-out tasks (exact McNemar test).

    python scripts/compare_policies.py runs/rollouts/policy_rl_test.jsonl artifacts/webshop/policy_sft_test_episodes.jsonl

Both files come from ``scripts/collect_policy_rollouts.py`` (or the pipeline's
``policy_sft_test_episodes.jsonl``) on the same tasks in the same order (task ``i`` of one file pairs with
task ``i`` of the other; the task ids are checked). Prints each policy's success rate, the tasks only one
of them solved, and the one-sided p-value of "A is better than B" (see :mod:`dreamgym.stats`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.provenance import report_result  # noqa: E402
from dreamgym.schema import read_trajectories  # noqa: E402
from dreamgym.stats import mcnemar_exact  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="episodes of policy A (JSONL)")
    ap.add_argument("b", help="episodes of policy B on the same tasks (JSONL)")
    ap.add_argument("--out", default=None, help="also write the result here (JSON, with command and commit)")
    args = ap.parse_args(argv)
    ta, tb = list(read_trajectories(args.a)), list(read_trajectories(args.b))
    if [t.task_id for t in ta] != [t.task_id for t in tb]:
        ap.error(
            f"{args.a} and {args.b} do not hold the same tasks in the same order ({len(ta)} vs {len(tb)} "
            "episodes); collect both with the same --first-task/--tasks"
        )
    out = {"a": args.a, "b": args.b, **mcnemar_exact([t.success for t in ta], [t.success for t in tb])}
    return report_result(
        out, args.out, "scripts/compare_policies.py", argv if argv is not None else sys.argv[1:]
    )


if __name__ == "__main__":
    main()
