"""Play a policy again on the held-out tasks of a benchmark record and compare, task by task.

    python scripts/recheck_record.py --policy artifacts/webshop_v2/policy_sft \
        --record benchmarks/results/suite_webshop.json --run warm_start/s0 \
        --out benchmarks/results/recheck_warm_start.json

Greedy evaluation is deterministic, so a record made at an older commit must be reproduced exactly by
the current code (the same tasks solved, the same mean score and steps) unless behaviour changed; the
result lists the tasks whose outcome differs. The episodes are played as the pipeline's evaluation
plays them (``collect_policy_trajectories`` with the RL config's collector, greedy, test split).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from dreamgym.collect import collect_policy_trajectories  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402
from dreamgym.rl.collector import collector_from_config  # noqa: E402
from dreamgym.schema import is_success  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, help="exported policy directory")
    ap.add_argument("--record", required=True, help="a suite results file (benchmarks/results/suite_*.json)")
    ap.add_argument("--run", required=True, help="the record's key under `runs`, e.g. warm_start/s0")
    ap.add_argument("--env", default="webshop")
    ap.add_argument(
        "--rl-config", default="configs/webshop_grpo.yaml", help="whose collector plays the episodes"
    )
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    runs = json.loads(Path(args.record).read_text())["runs"]
    if args.run not in runs:
        raise SystemExit(f"error: --run {args.run!r} is not in {args.record}; it has {sorted(runs)}")
    rec = runs[args.run]
    recorded = dict(zip(rec["task_ids"], (c == "1" for c in rec["successes"]), strict=True))
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    trajs, metrics = collect_policy_trajectories(
        args.policy, args.env, "test", list(range(len(recorded))), collector_from_config(args.rl_config),
        greedy=True, teacher=False, batch_size=args.batch_size,
    )  # fmt: skip
    now = {t.task_id: is_success(t.transitions[-1].reward, t.transitions[-1].done) for t in trajs}
    differing = sorted(k for k in recorded if now.get(k) != recorded[k])
    out = {
        "_meta": result_meta("scripts/recheck_record.py", argv),
        "record": {
            "file": args.record,
            "run": args.run,
            "commit": rec.get("commit"),
            "metrics": rec["metrics"],
        },
        "now": metrics,
        "tasks": len(recorded),
        "differing_tasks": differing,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_result(args.out, out)
    print(json.dumps({k: v for k, v in out.items() if k != "_meta"}, indent=1))
    return out


if __name__ == "__main__":
    main()
