"""What mixed precision costs in learning: the same SFT run in fp32 and in bf16-mixed, side by side.

Each precision trains the config's model from the same initialisation on the same batches for ``--steps``
optimiser steps (the LR schedule shortened to match), then validates once on ``--val-batches`` batches of
the config's validation data (held-out tasks). Reported per precision: wall seconds of the fit (compile and
validation included), the last logged train loss and every validation metric (``val/loss``, and for the experience
model its fidelity: reward accuracy, success precision/recall, next-state F1).

    python scripts/bench_precision.py --config configs/webshop_experience_sft.yaml --steps 300 \\
        --override=--model.init_args.lm.init_args.compile=true --out precision_sft.json

``--override`` goes to both runs (e.g. data paths, a compiled forward, as ``make run`` trains).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.provenance import result_meta, write_result  # noqa: E402

PRECISIONS = ("32-true", "bf16-mixed")


def run(config: str, precision: str, steps: int, val_batches: int, overrides: list[str], tmp: str) -> dict:
    """One fit of ``config`` at ``precision``; its timing and final metrics."""
    from dreamgym.cli import _lightning_cli

    name = precision.replace("-", "_")
    argv = [
        "fit", "--config", config, f"--trainer.precision={precision}", f"--trainer.max_steps={steps}",
        f"--model.init_args.lr_scheduler.init_args.total_steps={steps}", f"--trainer.val_check_interval={steps}",
        f"--trainer.limit_val_batches={val_batches}", f"--trainer.logger.init_args.save_dir={tmp}",
        f"--trainer.logger.init_args.name={name}", f"--model.init_args.export_dir={tmp}/{name}_model",
        *overrides,
    ]  # fmt: skip
    t0 = time.perf_counter()
    cli = _lightning_cli(argv)
    wall = time.perf_counter() - t0
    metrics = {k: round(float(v), 4) for k, v in cli.trainer.callback_metrics.items() if v.numel() == 1}
    return {"precision": precision, "steps": steps, "wall_s": round(wall, 1), "metrics": metrics}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="an SFT config (configs/webshop_experience_sft.yaml)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--val-batches", type=int, default=4)
    ap.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    ap.add_argument("--override", action="append", default=[], help="extra CLI override for both runs")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    result: dict = {
        "_meta": result_meta("scripts/bench_precision.py", argv),
        "config": args.config,
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for precision in args.precisions:
            r = run(args.config, precision, args.steps, args.val_batches, args.override, tmp)
            result["runs"].append(r)
            print(f"## {precision}: {r['wall_s']} s, {r['metrics']}", flush=True)
    if args.out:
        write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
