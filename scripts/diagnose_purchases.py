"""Which check of its purchase rationale an experience model gets wrong, per data source (WebShop).

    python scripts/diagnose_purchases.py --model artifacts/webshop_long/experience_model_dr8 \\
        --scripted non_oracle --episodes 200 \\
        --source warm_start=artifacts/webshop_long/policy_sft_test_episodes.jsonl \\
        --out benchmarks/results/diagnosis_webshop_dr8.json

The fidelity report says *how often* the model calls a failed purchase a success; this says *why*.
Every held-out purchase (the same teacher-forced query the fidelity report and the synthetic env
make) is answered by the model, its rationale parsed back into claims
(:func:`dreamgym.teachers.webshop.parse_purchase_checks`) and each claim compared with the real reward
breakdown of that purchase (:func:`dreamgym.observability.webshop_purchases`):

- ``parsed``: the rationale has a readable ``Checks:`` list;
- ``price_copied`` / ``cap_copied``: the price it states is the page's, the cap the instruction's;
- ``price_right``, ``type_right``: its price / type verdicts are the real ones;
- ``attributes_named`` / ``options_named``: the share of the goal's attributes / options its checks name
  (the rest are omitted); ``attributes_right`` / ``options_right``: of the named ones, the share whose
  found / not-found verdict is the real one; ``extra_terms``: named terms that are not the goal's;
- ``all_checks_right``: every goal term named with its real verdict, and price and type right;
- ``self_consistent``: the reward it states is the one its own checks imply;
- ``reward_right``: its success verdict is the real one (and ``success_precision`` / ``success_recall``,
  the fidelity report's teacher-forced figures for the same answers).

For each false positive (called a success, really a failure) the first cause found, in this order:
``unparsed``, ``failed_term_omitted`` (a failing goal term is not checked), ``wrong_check`` (a failing
term is checked as passing), ``not_derived`` (the checks say fail but the verdict says success).
JSON (keyed by source) and a markdown table next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dreamgym.envs.webshop.checks import page_facts, price_cap  # noqa: E402
from dreamgym.fidelity import success_precision_recall, teacher_forced_queries  # noqa: E402
from dreamgym.observability import webshop_purchases  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402
from dreamgym.schema import is_success  # noqa: E402
from dreamgym.teachers.webshop import parse_purchase_checks  # noqa: E402

RATES = (
    "parsed", "price_copied", "cap_copied", "price_right", "type_right", "attributes_named",
    "attributes_right", "options_named", "options_right", "all_checks_right", "self_consistent", "reward_right",
)  # fmt: skip
CAUSES = ("unparsed", "failed_term_omitted", "wrong_check", "not_derived")


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) < 0.005


def diagnose_purchase(reasoning: str, pred_reward: float | None, t, goal, real) -> dict:
    """One purchase's diagnosis (module docstring): rates as 0/1 (None when undefined) and, for a false
    positive, ``cause``. ``pred_reward`` None: the model's output did not parse."""
    claims = parse_purchase_checks(reasoning or "")
    real_ok = bool(t.success)
    said_ok = pred_reward is not None and is_success(pred_reward)
    row: dict = {"real_success": real_ok, "predicted_success": said_ok, "reward_right": said_ok == real_ok}
    row["parsed"] = claims is not None and pred_reward is not None
    attrs, opts = list(goal.attributes), list(goal.option_values())
    failing = real.attrs_missed + real.options_missed
    if claims is None:
        row.update({k: None for k in RATES if k not in row})
        row["all_checks_right"] = row["self_consistent"] = False
    else:
        price, cap = page_facts(t.state).price, price_cap(t.instruction)
        row["price_copied"] = _close(claims.price, price) if price is not None else None
        row["cap_copied"] = _close(claims.cap, cap) if cap else None
        row["price_right"] = claims.price_ok == real.price_ok
        row["type_right"] = claims.type_ok == (real.r_type >= 1.0)
        named_a = [a for a in attrs if a in claims.attributes]
        named_o = [o for o in opts if o in claims.options]
        row["attributes_named"] = len(named_a) / len(attrs) if attrs else None
        row["options_named"] = len(named_o) / len(opts) if opts else None
        row["attributes_right"] = (
            sum(claims.attributes[a] == (a in real.attrs_matched) for a in named_a) / len(named_a) if named_a else None
        )  # fmt: skip
        row["options_right"] = (
            sum(claims.options[o] == (o in real.options_matched) for o in named_o) / len(named_o) if named_o else None
        )  # fmt: skip
        row["extra_terms"] = len(set(claims.attributes) - set(attrs)) + len(set(claims.options) - set(opts))
        row["all_checks_right"] = bool(
            row["price_right"] and row["type_right"] and len(named_a) == len(attrs) and len(named_o) == len(opts)
            and row["attributes_right"] in (None, 1.0) and row["options_right"] in (None, 1.0)
        )  # fmt: skip
        row["self_consistent"] = claims.reward is not None and claims.reward == claims.derived_reward
    if said_ok and not real_ok:
        if not row["parsed"]:
            row["cause"] = "unparsed"
        else:
            checked = {**claims.attributes, **claims.options}
            if any(term not in checked for term in failing):
                row["cause"] = "failed_term_omitted"
            elif (
                any(checked[term] for term in failing)
                or (claims.price_ok and not real.price_ok)
                or (claims.type_ok and real.r_type < 1.0)
            ):
                row["cause"] = "wrong_check"
            else:
                row["cause"] = "not_derived"
    return row


def summarise(rows: list[dict]) -> dict:
    """Mean of every rate over the purchases where it is defined, false-positive causes, ``n``."""
    out: dict = {"n": len(rows)}
    for k in RATES:
        vals = [float(r[k]) for r in rows if r.get(k) is not None]
        out[k] = sum(vals) / len(vals) if vals else None
    out["extra_terms"] = sum(r.get("extra_terms", 0) for r in rows) / max(len(rows), 1)
    tp = sum(r["predicted_success"] and r["real_success"] for r in rows)
    said, real = sum(r["predicted_success"] for r in rows), sum(r["real_success"] for r in rows)
    out["success_precision"], out["success_recall"] = success_precision_recall(tp, said - tp, real - tp)
    causes = Counter(r["cause"] for r in rows if "cause" in r)
    out["false_positives"] = sum(causes.values())
    out["causes"] = {c: causes.get(c, 0) for c in CAUSES}
    return out


def diagnose(experience, trajectories) -> dict:
    """The summary (:func:`summarise`) of every purchase of ``trajectories`` answered by ``experience``."""
    purchases = [(t, goal, real) for _, t, goal, real in webshop_purchases(trajectories) if goal is not None]
    queries, asked = teacher_forced_queries(trajectories, done_only=True)
    by_id = {id(t): (goal, real) for t, goal, real in purchases}
    rows = []
    for pred, t in zip(experience.predict(queries), asked, strict=True):
        if id(t) not in by_id:
            continue  # a terminating step that is not a purchase (none in WebShop's action space)
        goal, real = by_id[id(t)]
        rows.append(diagnose_purchase(pred.reasoning, pred.reward if pred.ok else None, t, goal, real))
    return summarise(rows)


def markdown(result: dict) -> str:
    cols = ["n", "success_precision", "success_recall", *RATES, "false_positives", *CAUSES]
    lines = ["| source | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in result.items():
        if name.startswith("_"):
            continue
        vals = [row.get(c, row["causes"].get(c)) if c in CAUSES else row.get(c) for c in cols]
        cells = ["" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)) for v in vals]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    meta = result.get("_meta", {})
    return "\n".join(lines) + f"\n\nCommand: `{meta.get('command', '')}` (commit {meta.get('commit', '')})\n"


def main(argv: list[str] | None = None) -> dict:
    from dreamgym.modeling.experience import ExperienceModel

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fidelity_report import collect_sources

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="exported experience-model directory")
    ap.add_argument("--scripted", nargs="*", default=["non_oracle"], help="scripted sources to collect")
    ap.add_argument("--episodes", type=int, default=200, help="test episodes per scripted source")
    ap.add_argument("--source", action="append", default=[], help="NAME=episodes.jsonl (test split)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/diagnosis_webshop.json")
    args = ap.parse_args(argv)
    args.env, args.env_kwargs = "webshop", "{}"
    em = ExperienceModel.from_pretrained(args.model, batch_size=args.batch_size)
    result: dict = {
        "_meta": {
            **result_meta("scripts/diagnose_purchases.py", argv),
            "model": str(args.model),
        }
    }
    for name, trajs in collect_sources(args).items():
        result[name] = diagnose(em, trajs)
        print(f"[diagnose] {name}: {json.dumps(result[name])}", flush=True)
    md = markdown(result)
    write_result(args.out, result, indent=2, markdown=md)
    print(md)
    return result


if __name__ == "__main__":
    main()
