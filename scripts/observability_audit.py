"""Observability audit: the share of transitions whose reward the experience model's prompt decides.

    python scripts/observability_audit.py --data artifacts/webshop/offline_train.jsonl
    python scripts/observability_audit.py --collect 200 --split test --out benchmarks/results/observability_webshop.json

``--data`` audits trajectory files (per ``policy``); ``--collect N`` collects N test- or train-split
episodes of each scripted source (expert, random, non_oracle, near_miss) with the current item page
and with the older one (``item_facts=False``) and audits both. See :mod:`dreamgym.observability`.
``--choices`` (WebShop, with ``--data``) adds the policy-side audit: how often each source's product
clicks are what the visible results page ranks first (``webshop_choice_audit``; ``--success-only``:
the trajectories behaviour cloning keeps).

    python scripts/observability_audit.py --data artifacts/webshop_long/offline_train.jsonl --choices --success-only
"""

from __future__ import annotations

import argparse

from dreamgym.collect import collect_trajectories
from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.observability import audit, format_report, webshop_choice_audit
from dreamgym.schema import read_trajectories

SCRIPTED = {"expert": 1, "random": 2, "non_oracle": 1, "near_miss": 1}  # random buys in ~half its episodes


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="*", default=[], help="trajectory JSONL files to audit")
    ap.add_argument("--collect", type=int, default=0, help="episodes per scripted source to collect")
    ap.add_argument("--split", default="test", choices=["train", "val", "test"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--env", default="webshop")
    ap.add_argument("--choices", action="store_true", help="also audit product choices (WebShop, --data)")
    ap.add_argument("--success-only", action="store_true", help="choices of successful trajectories only")
    ap.add_argument("--out", default=None, help="write the report as JSON here")
    args = ap.parse_args(argv)
    if not args.data and not args.collect:
        ap.error("give --data FILE... or --collect N")
    reports = {}
    if args.data:
        trajs = [t for path in args.data for t in read_trajectories(path)]
        reports["data"] = audit(args.env, trajs)
        if args.choices:
            reports["choices"] = webshop_choice_audit(trajs, success_only=args.success_only)
    if args.collect:
        mix = {name: args.collect * f for name, f in SCRIPTED.items()}
        for label, facts in (("item_facts", True), ("no_item_facts", False)):
            trajs = collect_trajectories(
                args.env, args.split, 0, 0, mix=mix, seed=args.seed, teacher=False, batch_size=16,
                env_kwargs={"item_facts": facts},
            )  # fmt: skip
            reports[label] = audit(args.env, trajs)
    for label, rep in reports.items():
        print(f"## {label}\n{format_choices(rep) if label == 'choices' else format_report(rep)}\n")
    if args.out:
        meta = result_meta("scripts/observability_audit.py", argv)
        write_result(args.out, {"_meta": meta, **reports}, indent=2)
    return reports


def format_choices(report: dict) -> str:
    """The choice audit as a markdown table, one row per source."""
    cols = ("best", "tied", "below", "unlisted")
    lines = ["| source | product clicks | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for src in sorted(report, key=lambda k: (k == "all", k)):
        row = report[src]
        lines.append(f"| {src} | {int(row['clicks'])} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
