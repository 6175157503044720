"""How well a cloned policy imitates its teacher: the action it writes in recorded states, by verb.

    python scripts/imitation_accuracy.py --policy artifacts/alfworld/policy_sft \\
        --data artifacts/alfworld/offline_train.jsonl --policies non_oracle --steps 300 \\
        --config configs/alfworld_grpo.yaml --out benchmarks/results/alfworld_imitation.json

Samples ``--steps`` steps (seeded) of the successful trajectories of ``--policies`` in ``--data``, shows the
policy each step's recorded prompt (its history the teacher's own actions: teacher forcing) and decodes
one action greedily with the collector of ``--config`` (prompt format, constrained decoding: exactly what
RL and evaluation do, :meth:`dreamgym.rl.collector.RolloutCollector.choose`). Reports the share of exact
matches per teacher verb (the action's first word: ``go``, ``open``, ``take``, ``click``...) and what the
policy wrote instead, so a warm start that fails its held-out episodes shows *which* decision it has not
learned. On the warm start's own training data this measures fitting, not generalisation; pass a file of
another split for that.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.envs.episodes import Episode  # noqa: E402
from dreamgym.envs.webshop.pages import BUTTONS  # noqa: E402
from dreamgym.provenance import report_result  # noqa: E402
from dreamgym.rl.collector import collector_from_config  # noqa: E402
from dreamgym.schema import read_trajectories  # noqa: E402


def prefixes(path: str, policies: list[str], steps: int, seed: int) -> list[tuple[Episode, str]]:
    """``steps`` sampled (episode prefix ending in a recorded state, the teacher's action there)."""
    pool = [
        (traj, i)
        for traj in read_trajectories(path)
        if traj.success and (not policies or traj.policy in policies)
        for i in range(len(traj.transitions))
    ]
    if not pool:
        raise SystemExit(f"--data {path} holds no successful trajectory of --policies {policies}")
    out = []
    for n, (traj, i) in enumerate(random.Random(seed).sample(pool, min(steps, len(pool)))):
        ts = traj.transitions[: i + 1]
        ep = Episode(
            episode_id=n, task_index=0, group_id=n, task_id=ts[-1].task_id, instruction=ts[-1].instruction,
            states=[t.state for t in ts], actions=[t.action for t in ts[:-1]],
            available=[list(t.available_actions) for t in ts],
        )  # fmt: skip
        out.append((ep, ts[-1].action))
    return out


def _verb(action: str) -> str:
    """What kind of decision ``action`` is: ``search``, ``click[buy now]`` (a button), ``click[<product>]``
    (a 10-character product id), ``click[<option>]`` for bracketed actions; else the first word (``go`` of
    ``go to desk 1``; empty for an empty action)."""
    m = re.fullmatch(r"(\w+)\[(.*)\]", action.strip())
    if m is None:
        return (action.split() or [""])[0]
    name, arg = m.group(1), m.group(2).strip().lower()
    if name == "search":
        return name
    if arg in BUTTONS:
        return f"{name}[{arg}]"
    is_id = re.fullmatch(r"[a-z0-9]{10}", arg) is not None and any(c.isdigit() for c in arg)
    return f"{name}[<product>]" if is_id else f"{name}[<option>]"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, help="saved policy directory (save_pretrained)")
    ap.add_argument("--data", required=True, help="trajectory JSONL of the cloned teacher")
    ap.add_argument("--policies", nargs="*", default=[], help="teacher policy names to keep (default: all)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", default="configs/webshop_grpo.yaml", help="RL config whose collector decodes")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from dreamgym.modeling import LanguageModel

    model, tok = LanguageModel(path=args.policy).build()
    collector = collector_from_config(args.config).use_format_of(args.policy)
    cases = prefixes(args.data, args.policies, args.steps, args.seed)
    written: list[str] = []
    for k in range(0, len(cases), args.batch):
        written += collector.choose(model, tok, [ep for ep, _ in cases[k : k + args.batch]], greedy=True)
    total, hits, instead = Counter(), Counter(), Counter()
    for (_, want), got in zip(cases, written, strict=True):
        verb = _verb(want)
        total[verb] += 1
        if got.strip() == want.strip():
            hits[verb] += 1
        else:
            instead[f"{verb} -> {_verb(got)}"] += 1
    report = {
        "policy": args.policy, "data": args.data, "policies": args.policies, "steps": len(cases),
        "seed": args.seed, "config": args.config,
        "exact": sum(hits.values()) / len(cases),
        "by_verb": {v: {"steps": total[v], "exact": hits[v] / total[v]} for v in sorted(total, key=total.get, reverse=True)},
        "mistakes": dict(instead.most_common()),
    }  # fmt: skip
    return report_result(report, args.out, "scripts/imitation_accuracy.py", argv, indent=2)


if __name__ == "__main__":
    main()
