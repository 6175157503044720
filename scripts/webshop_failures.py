"""Why WebShop episodes fail, by kind, on the same held-out tasks: where RL stops and what the next lever is.

    python scripts/webshop_failures.py \\
        --source warm_start=artifacts/webshop_long/policy_sft_test_episodes.jsonl \\
        --agent non_oracle --out benchmarks/results/failures_webshop_long.json

Each source is a trajectory file of held-out episodes (e.g. a pipeline's ``policy_sft_test_episodes.jsonl`` or
a benchmark record's ``test_episodes.jsonl``); ``--agent NAME`` adds a scripted agent (the visible-text
shopper ``non_oracle``, ...) playing the real env on the same task ids. Every purchase is scored again by the
real reward's terms (:func:`dreamgym.envs.webshop.reward.purchase_score`, an audit: the policy never sees
them), and each failed episode gets the first kind that applies:

* ``no_purchase``: the episode ended without buying (step limit, or invalid actions until then);
* ``product_type``: the product bought is not the kind the goal asks for (``r_type < 1``: no query or
  category match and few shared title nouns);
* ``attributes``: a goal attribute is missing from the product bought;
* ``options``: a goal option was not selected;
* ``price``: the product is over the price cap.

Also per source: ``target_listed``, the share of episodes whose results pages ever listed the product the
instruction was written for (a query that never surfaces it fails before any choice), multi-label counts
(``terms_missed``) and ``failed_purchase_score``, the mean score the real env paid the purchases that failed (what
a learning reward of the purchase score pays a wrong purchase, against 0 for none). Every later source is compared with the first on the task ids both played
(``vs_first``: the two-sided exact McNemar test on success, :func:`dreamgym.stats.mcnemar_exact`), e.g. a
DAgger'd warm start against the warm start it continues. Reads files and plays scripted agents only (seconds).
"""

from __future__ import annotations

import argparse
from collections import Counter

from dreamgym.envs.webshop import WebShopEnv
from dreamgym.envs.webshop.grounding import page_of
from dreamgym.envs.webshop.reward import purchase_score
from dreamgym.lab.provenance import report_result
from dreamgym.schema import Trajectory, read_trajectories
from dreamgym.stats import mcnemar_exact

KINDS = ("solved", "no_purchase", "product_type", "attributes", "options", "price")


def _purchase(traj: Trajectory) -> tuple[str, dict[str, str]] | None:
    """The product and options the episode's done page names; None without a purchase."""
    last = traj.transitions[-1].next_state if traj.transitions else ""
    for line in last.split("\n"):
        if line.startswith("[purchased] "):
            asin, _, opts = line[len("[purchased] ") :].partition(" | options: ")
            pairs = [p.split(": ", 1) for p in opts.split(" ; ") if ": " in p]
            return asin.strip(), {k: v for k, v in pairs}
    return None


def classify(env: WebShopEnv, traj: Trajectory) -> tuple[str, list[str], bool]:
    """The episode's kind (``KINDS``), the reward terms it missed and whether the target was ever listed."""
    goal = env.goals[env.split][env.task_index_of(traj.task_id)]
    target = goal.asin.lower()
    listed = any(
        page_of(t.next_state)[:1] == ("results",) and f"[product] {target} |" in t.next_state
        for t in traj.transitions
    )
    bought = _purchase(traj)
    if bought is None:
        return "no_purchase", ["no_purchase"], listed
    product = env.catalog.products.get(bought[0].upper())
    if product is None:
        return "product_type", ["product_type"], listed
    b = purchase_score(product, goal, bought[1])
    missed = [
        k
        for k, bad in (
            ("product_type", b.r_type < 1),
            ("attributes", bool(b.attrs_missed)),
            ("options", bool(b.options_missed)),
            ("price", not b.price_ok),
        )
        if bad
    ]
    return ("solved" if b.score >= 1.0 else missed[0] if missed else "product_type"), missed, listed


def breakdown(env: WebShopEnv, trajs: list[Trajectory]) -> dict:
    kinds, terms, listed, outcomes = Counter(), Counter(), 0, []
    for traj in trajs:
        kind, missed, seen = classify(env, traj)
        kinds[kind] += 1
        terms.update(missed)
        listed += seen
        outcomes.append(
            {
                "task_id": traj.task_id,
                "kind": kind,
                "missed": missed,
                "target_listed": seen,
                "score": traj.score,
            }
        )
    n = max(len(trajs), 1)
    wrong = [o["score"] for o in outcomes if o["kind"] not in ("solved", "no_purchase")]
    return {
        "episodes": len(trajs),
        "success": kinds["solved"] / n,
        "kinds": {k: kinds[k] / n for k in KINDS},
        "terms_missed": {k: terms[k] / n for k in KINDS[1:]},
        "target_listed": listed / n,
        "failed_purchase_score": sum(wrong) / len(wrong) if wrong else None,
        "episodes_by_task": outcomes,  # each episode's kind: the figures above are recomputed from these
    }


def vs_first(found: dict[str, dict]) -> dict[str, dict]:
    """Each source after the first against the first, on the task ids both played once: the two-sided exact
    McNemar test on success (``only_a``: tasks only that source solved, ``only_b``: only the first)."""
    solved = {
        name: {o["task_id"]: o["kind"] == "solved" for o in b["episodes_by_task"]}
        for name, b in found.items()
    }
    first, *rest = list(solved) or [None]
    out = {}
    for name in rest:
        common = sorted(set(solved[name]) & set(solved[first]))
        test = mcnemar_exact([solved[name][t] for t in common], [solved[first][t] for t in common])
        out[name] = {"against": first, **test}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", nargs="+", action="extend", required=True, metavar="NAME=EPISODES.jsonl")
    ap.add_argument("--agent", nargs="*", default=[], help="scripted agents to play the same task ids")
    ap.add_argument("--split", default="test")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    env = WebShopEnv(split=args.split)
    sources: dict[str, list[Trajectory]] = {}
    for spec in args.source:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"--source {spec!r}: write NAME=EPISODES.jsonl")
        sources[name] = list(read_trajectories(path))
    ids = {t.task_id for trajs in sources.values() for t in trajs}
    if args.agent:
        from dreamgym.collect import collect_trajectories

        n = len(env.goals[args.split])
        for name in args.agent:
            played = collect_trajectories(
                "webshop", args.split, 0, 0, seed=args.seed, teacher=False, mix={name: n}
            )
            sources[name] = [t for t in played if t.task_id in ids]
    found = {k: breakdown(env, v) for k, v in sources.items()}
    result = {"split": args.split, "task_ids": len(ids), "sources": found, "vs_first": vs_first(found)}
    return report_result(result, args.out, "scripts/webshop_failures.py", argv)


if __name__ == "__main__":
    main()
