"""How policies act in their held-out episodes: wins, verbs, repeated actions, per task type, against a reference.

    python scripts/episode_stats.py --reference warm_start=artifacts/alfworld/policy_sft_test_episodes.jsonl \\
        --source real_grpo_s0=artifacts/benchmark_alfworld/real_grpo/s0/test_episodes.jsonl \\
        --out benchmarks/results/alfworld_rl_behaviour.json

Per source (a trajectory JSONL, e.g. a benchmark record's ``test_episodes.jsonl``):

- ``episodes``, ``wins``, ``steps``;
- ``verbs``: the share of steps whose action starts with each first word (``go``, ``open``, ``take`` ...);
- ``repeat_rate``: the share of steps whose action the same episode already took (a policy walking in a
  loop between two receptacles repeats nearly every ``go to``); ``repeat_rate_by_verb`` per first word;
- ``per_episode``: the mean count per episode of each verb;
- ``by_type``: wins per task type (the third part of an ALFWorld task id, ``alfworld/<split>/<type>/...``;
  other envs' ids give ``other``);
- with ``--reference``, ``vs_reference``: on the task ids both files play, the tasks only this source
  wins (``gained``), only the reference wins (``lost``) and the two-sided exact McNemar p of the split.

Reads the files only (seconds); the JSON keeps the command and commit under ``_meta``.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

from dreamgym.lab.provenance import report_result
from dreamgym.schema import read_trajectories
from dreamgym.stats import mcnemar_exact


def task_type(task_id: str) -> str:
    """``alfworld/<split>/<type>/...`` -> ``<type>``; any other id -> ``other``."""
    parts = task_id.split("/")
    return parts[2] if len(parts) > 3 and parts[0] == "alfworld" else "other"


def episode_stats(path: str) -> tuple[dict, dict[str, bool]]:
    """The statistics of one trajectory file and its outcome per task id."""
    verbs, repeats, types, won_types = Counter(), Counter(), Counter(), Counter()
    outcome: dict[str, bool] = {}
    steps = 0
    for traj in read_trajectories(path):
        outcome[traj.task_id] = bool(traj.success)
        kind = task_type(traj.task_id)
        types[kind] += 1
        won_types[kind] += bool(traj.success)
        taken: set[str] = set()
        for t in traj.transitions:
            action = (t.action or "").strip()
            verb = action.split(" ", 1)[0] if action else "(none)"
            steps += 1
            verbs[verb] += 1
            repeats[verb] += action in taken
            taken.add(action)
    n = max(len(outcome), 1)
    stats = {
        "episodes": len(outcome),
        "wins": sum(outcome.values()),
        "steps": steps,
        "repeat_rate": round(sum(repeats.values()) / max(steps, 1), 3),
        "verbs": {v: round(c / max(steps, 1), 3) for v, c in verbs.most_common()},
        "per_episode": {v: round(c / n, 2) for v, c in verbs.most_common()},
        "repeat_rate_by_verb": {v: round(repeats[v] / c, 3) for v, c in verbs.most_common()},
        "by_type": {k: f"{won_types[k]} of {types[k]}" for k in sorted(types)},
    }
    return stats, outcome


def versus(outcome: dict[str, bool], reference: dict[str, bool]) -> dict:
    """Tasks gained / lost against the reference on the ids both played, with the exact McNemar p."""
    common = sorted(set(outcome) & set(reference))
    test = mcnemar_exact([outcome[t] for t in common], [reference[t] for t in common])
    return {
        "tasks": len(common),
        "gained": int(test["only_a"]),
        "lost": int(test["only_b"]),
        "p_two_sided": round(test["p_two_sided"], 4),
    }


def _named(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"error: --source/--reference {spec!r} must be NAME=path/to/episodes.jsonl")
    return name, path


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", action="append", default=[], help="NAME=episodes.jsonl (repeatable)")
    ap.add_argument("--reference", default=None, help="NAME=episodes.jsonl every source is compared with")
    ap.add_argument("--out", default=None, help="JSON result file (printed either way)")
    args = ap.parse_args(argv)
    if not args.source and not args.reference:
        ap.error("give at least one --source NAME=episodes.jsonl")
    result: dict[str, dict] = {}
    ref = None
    if args.reference:
        name, path = _named(args.reference)
        result[name], ref = episode_stats(path)
        result[name]["path"] = path
    for spec in args.source:
        name, path = _named(spec)
        stats, outcome = episode_stats(path)
        stats["path"] = path
        if ref is not None:
            stats["vs_reference"] = versus(outcome, ref)
        result[name] = stats
    return report_result(result, args.out, "scripts/episode_stats.py", argv)


if __name__ == "__main__":
    main()
