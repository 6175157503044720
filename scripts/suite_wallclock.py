"""What a benchmark suite cost in wall-clock: its records' fit and evaluation seconds plus its trainings'.

    python scripts/suite_wallclock.py --results benchmarks/results/suite_webshop.json \
        --training warm_start=artifacts/webshop_v2/runs/policy_sft \
        --training experience=artifacts/webshop_long/runs/experience_model --out FILE

Each ``--training NAME=RUN_DIR`` is a training run's TensorBoard folder; its seconds are the span from its
first to its last logged scalar (the folder's newest ``version_N`` that logs anything). The records give
``fit_seconds`` and ``eval_seconds`` of every (arm, seed). Stages that log nothing (data collection,
episode playing outside the records) are not counted; the result says so. ``--run "CMD"`` first runs the
suite's command (e.g. its ``--quick true`` mode) and records its whole wall-clock as ``run_seconds``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.plots import scalar_events  # noqa: E402
from dreamgym.provenance import report_result  # noqa: E402


def training_seconds(run_dir: str) -> float:
    """First-to-last scalar span (seconds) of the newest run under ``run_dir`` that logs scalars."""
    times = [e.wall_time for events in scalar_events(run_dir).values() for e in events]
    if not times:
        raise SystemExit(
            f"error: --training {run_dir!r} holds no TensorBoard scalars; pass a training's log folder"
        )
    return max(times) - min(times)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="a suite's results JSON")
    ap.add_argument("--training", action="append", default=[], metavar="NAME=RUN_DIR")
    ap.add_argument("--run", default=None, help="a command to run first; its wall-clock is run_seconds")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    run_seconds = None
    if args.run:
        t0 = time.perf_counter()
        subprocess.run(shlex.split(args.run), check=True)
        run_seconds = round(time.perf_counter() - t0, 1)
    runs = json.loads(Path(args.results).read_text())["runs"]
    fit = sum(r.get("fit_seconds", 0.0) for r in runs.values())
    evaluation = sum(r.get("eval_seconds", 0.0) for r in runs.values())
    trainings = {}
    for item in args.training:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --training {item!r} is not NAME=RUN_DIR")
        trainings[name] = round(training_seconds(path), 1)
    total = fit + evaluation + sum(trainings.values())
    return report_result(
        {
            "results": args.results,
            "records": len(runs),
            "fit_seconds": round(fit, 1),
            "eval_seconds": round(evaluation, 1),
            "training_seconds": trainings,
            "total_seconds": round(total, 1),
            **({"run": args.run, "run_seconds": run_seconds} if args.run else {}),
            "not_counted": "stages that log nothing: offline data collection, the warm start's on-policy episodes",
        },
        args.out,
        "scripts/suite_wallclock.py",
        argv,
    )


if __name__ == "__main__":
    main()
