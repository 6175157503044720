"""Do two TensorBoard runs log the same curve? (e.g. one recipe trained at two commits)

    python scripts/compare_curves.py RUN_A RUN_B --tag train/loss --out result.json

RUN_A / RUN_B: a run's folder (``version_N``) or an event file. Pairs the two logs step by step on the
steps both reached and reports how many agree exactly, the largest difference and the first step where
they differ, so "the same training up to step S" is a stored result, not a reading of two plots.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.plots import run_scalars  # noqa: E402
from dreamgym.provenance import report_result  # noqa: E402


def scalars(run: str, tag: str) -> dict[int, float]:
    """``{step: value}`` of ``tag`` in ``run`` (a folder's event files, or one event file)."""
    if os.path.isdir(run) and not glob.glob(os.path.join(run, "events.out.tfevents.*")):
        raise SystemExit(f"error: {run!r} holds no TensorBoard event file; pass a version_N folder")
    out = dict(run_scalars(run, [tag]).get(tag, []))
    if not out:
        raise SystemExit(f"error: {run!r} logs no scalar {tag!r}")
    return out


def compare(a: dict[int, float], b: dict[int, float]) -> dict:
    """Agreement of two ``{step: value}`` curves on their common steps."""
    common = sorted(set(a) & set(b))
    diffs = [abs(a[s] - b[s]) for s in common]
    first = next((s for s, d in zip(common, diffs, strict=True) if d != 0.0), None)
    return {
        "common_steps": len(common),
        "last_common_step": common[-1] if common else None,
        "equal_steps": sum(d == 0.0 for d in diffs),
        "max_abs_diff": max(diffs, default=0.0),
        "first_differing_step": first,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tag", default="train/loss")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = {
        "a": args.a,
        "b": args.b,
        "tag": args.tag,
        **compare(scalars(args.a, args.tag), scalars(args.b, args.tag)),
    }
    return report_result(out, args.out, "scripts/compare_curves.py", argv)


if __name__ == "__main__":
    main()
