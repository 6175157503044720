"""Fidelity report of an experience model per data source, on held-out test-split tasks: JSON + markdown.

    python scripts/fidelity_report.py --model artifacts/webshop/experience_model \\
        --episodes 200 --source warm_start=artifacts/webshop/policy_sft_test_episodes.jsonl \\
        --out benchmarks/results/fidelity_webshop.json

Sources: the scripted ones (``expert``, ``random``, ``non_oracle``, ``near_miss``) are collected here on
test-split tasks (``--episodes`` each, ``random`` twice as many since it buys in about half of its
episodes; seed ``--seed``), and any ``NAME=episodes.jsonl`` given with ``--source`` (a policy's test
episodes, e.g. ``warm_start`` or ``grpo``). Per source:

- ``done``: teacher-forced on every purchase (the final terminating step) through the same
  ``ExperienceModel.predict`` the synthetic env calls: ``success_precision``, ``success_recall``,
  ``success_f1``, ``reward_acc``, ``done_acc``, ``n`` (these are also the source's top-level keys);
- ``steps``: teacher-forced on every valid step of ``--steps-trajectories`` sampled episodes
  (next-state token F1 against the copy-the-current-state baseline, done accuracy, reward accuracy);
- ``open_loop``: ``--open-loop`` sampled episodes replayed on the model's own states (final-reward
  accuracy, final-state token F1);
- ``decisive`` (with ``--decisive-verbs``): teacher-forced on every step of the source whose action
  starts with one of these verbs, e.g. ``move`` on ALFWorld, where a placement wins the episode or does
  not (the policy's wrong placements are what a synthetic env must not reward);
- ``observability``: :func:`dreamgym.observability.audit` of the source's episodes (the share of
  purchases whose reward the model's prompt decides); empty for an env it does not audit (ALFWorld).

The JSON keeps the command, the commit and the model path under ``_meta``; the markdown table is
printed and written next to it (``.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dreamgym.collect import collect_trajectories
from dreamgym.fidelity import open_loop_eval, teacher_forced_eval
from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.modeling.experience import ExperienceModel
from dreamgym.observability import AUDITED_ENVS, audit
from dreamgym.schema import read_trajectories

SCRIPTED = ("expert", "random", "non_oracle", "near_miss")
DONE_KEYS = ("success_precision", "success_recall", "success_f1", "reward_acc", "done_acc", "n")


def collect_sources(args) -> dict[str, list]:
    """The held-out episodes of every source: scripted ones collected on test tasks, files read."""
    out = {}
    for name in args.scripted:
        n = args.episodes * (2 if name == "random" else 1)
        out[name] = collect_trajectories(
            args.env, "test", 0, 0, mix={name: n}, seed=args.seed, teacher=False, batch_size=16,
            env_kwargs=json.loads(args.env_kwargs),
        )  # fmt: skip
    for spec in args.source:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--source {spec!r}: expected NAME=episodes.jsonl")
        trajs = list(read_trajectories(path))
        if any(t.split != "test" for t in trajs):
            raise SystemExit(f"--source {spec!r}: holds non-test-split episodes; fidelity is held-out only")
        out[name] = trajs
    return out


def report(
    experience,
    sources: dict[str, list],
    env: str = "webshop",
    steps_trajectories: int = 20,
    open_loop: int = 40,
    seed: int = 1,
    fmt=None,
    decisive_verbs: list[str] | None = None,
) -> dict:
    """The per-source fidelity rows (module docstring) of ``experience`` (``.predict`` like
    :class:`ExperienceModel`); ``fmt`` is its prompt layout for the observability audit."""
    rng = random.Random(seed)
    result = {}
    for name, trajs in sources.items():
        t0 = time.time()
        done = teacher_forced_eval(experience, trajs, done_only=True)
        row = {k: done[k] for k in DONE_KEYS}
        row["done"] = done
        sample = rng.sample(trajs, min(steps_trajectories, len(trajs)))
        row["steps"] = teacher_forced_eval(experience, sample, done_only=False) if sample else {}
        ol = rng.sample(trajs, min(open_loop, len(trajs)))
        row["open_loop"] = open_loop_eval(experience, ol) if ol else {}
        if decisive_verbs:
            row["decisive"] = teacher_forced_eval(experience, trajs, verbs=decisive_verbs)
        row["observability"] = audit(env, trajs, fmt=fmt)["all"] if env in AUDITED_ENVS else {}
        row["real_success_rate"] = sum(t.success for t in trajs) / max(len(trajs), 1)
        row["wall_s"] = round(time.time() - t0, 1)
        result[name] = row
        print(f"[fidelity] {name}: {json.dumps({k: round(v, 3) for k, v in row.items() if k in DONE_KEYS})}",
              flush=True)  # fmt: skip
    return result


def markdown(result: dict) -> str:
    cols = [
        ("purchases", lambda r: f"{int(r['n'])}"),
        ("real success", lambda r: f"{r['real_success_rate']:.3f}"),
        ("success precision", lambda r: f"{r['success_precision']:.3f}"),
        ("success recall", lambda r: f"{r['success_recall']:.3f}"),
        ("reward acc", lambda r: f"{r['reward_acc']:.3f}"),
        ("open-loop reward acc", lambda r: f"{r['open_loop'].get('open_loop_reward_acc', float('nan')):.3f}"),
        ("state F1 (copy)", lambda r: f"{r['steps'].get('state_token_f1', float('nan')):.3f} "
                                      f"({r['steps'].get('copy_state_token_f1', float('nan')):.3f})"),
        ("observable purchases", lambda r: f"{r['observability'].get('purchase_share', float('nan')):.3f}"),
    ]  # fmt: skip
    if any("decisive" in r for n, r in result.items() if not n.startswith("_")):
        cols += [
            ("decisive steps", lambda r: f"{int(r['decisive']['n'])}"),
            ("decisive precision", lambda r: f"{r['decisive']['success_precision']:.3f}"),
            ("decisive recall", lambda r: f"{r['decisive']['success_recall']:.3f}"),
            ("decisive FPR", lambda r: f"{r['decisive']['success_fpr']:.3f}"),
        ]
    lines = ["| source | " + " | ".join(c for c, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in result.items():
        if not name.startswith("_"):
            lines.append(f"| {name} | " + " | ".join(f(row) for _, f in cols) + " |")
    meta = result["_meta"]
    return "\n".join(lines) + f"\n\nCommand: `{meta['command']}` (commit {meta['commit'][:10]})\n"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="exported experience-model directory")
    ap.add_argument("--env", default="webshop")
    ap.add_argument("--scripted", nargs="*", default=list(SCRIPTED), help="scripted sources to collect")
    ap.add_argument("--episodes", type=int, default=200, help="test episodes per scripted source")
    ap.add_argument("--source", action="append", default=[], help="NAME=episodes.jsonl (test split)")
    ap.add_argument("--steps-trajectories", type=int, default=20, help="episodes for all-step metrics")
    ap.add_argument("--open-loop", type=int, default=40, help="episodes for the open-loop check")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--env-kwargs", default="{}", help="JSON env arguments for the scripted sources, e.g. "
                    "'{\"item_facts\": false}' for a model trained on the older item page")  # fmt: skip
    ap.add_argument("--decisive-verbs", nargs="*", default=[], help="also ask every step whose action starts "
                    "with one of these verbs (e.g. move: ALFWorld's placements)")  # fmt: skip
    ap.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=0,
        help="the experience model's no_repeat_ngram (as the synthetic env's config sets it; ALFWorld: 8)",
    )
    ap.add_argument("--out", default="benchmarks/results/fidelity_webshop.json")
    args = ap.parse_args(argv)
    em = ExperienceModel.from_pretrained(
        args.model, batch_size=args.batch_size, no_repeat_ngram=args.no_repeat_ngram
    )
    meta = {
        **result_meta("scripts/fidelity_report.py", argv),
        "model": str(args.model),
        "k": em.fmt.k,
        "use_reasoning": em.fmt.use_reasoning,
    }
    rows = report(
        em, collect_sources(args), args.env, args.steps_trajectories, args.open_loop, args.seed, em.fmt,
        args.decisive_verbs,
    )  # fmt: skip
    result = {"_meta": meta, **rows}
    md = markdown(result)
    write_result(args.out, result, indent=2, markdown=md)
    print(md)
    return result


if __name__ == "__main__":
    main()
