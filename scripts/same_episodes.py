"""Do two trajectory files hold the same episodes, and in the same order?

    python scripts/same_episodes.py A.jsonl B.jsonl [--out result.json]

An episode is compared by what a model trains on: its policy, task, and each step's state, available
actions, action and rationale (ids and timestamps are ignored). Answers whether two collections of the
"same" data differ in content or only in order: order alone changes every length-grouped SFT batch.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.provenance import report_result  # noqa: E402
from dreamgym.schema import Trajectory, read_trajectories  # noqa: E402


def content(t: Trajectory) -> tuple:
    """What an SFT stage reads of an episode."""
    steps = tuple((s.state, tuple(s.available_actions), s.action, s.reasoning) for s in t.transitions)
    return (t.policy, t.task_id, steps)


def compare(a: list[Trajectory], b: list[Trajectory]) -> dict:
    """Counts of episodes, of those only in one file (as multisets), and of positions that differ."""
    ka, kb = [content(t) for t in a], [content(t) for t in b]
    ca, cb = Counter(ka), Counter(kb)
    same_order = sum(x == y for x, y in zip(ka, kb, strict=False))
    return {
        "episodes": [len(a), len(b)],
        "only_in_a": sum((ca - cb).values()),
        "only_in_b": sum((cb - ca).values()),
        "same_episodes": ca == cb,
        "positions_equal": same_order,
        "same_order": ca == cb and same_order == len(a),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--out", default=None, help="write the result here (JSON, with command and commit)")
    args = ap.parse_args(argv)
    out = {
        "a": args.a,
        "b": args.b,
        **compare(list(read_trajectories(args.a)), list(read_trajectories(args.b))),
    }
    return report_result(out, args.out, "scripts/same_episodes.py", argv)


if __name__ == "__main__":
    main()
