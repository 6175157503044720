"""Held-out fidelity of the reward judge per purchase source, beside the generated reward: JSON + markdown.

    python scripts/judge_report.py --judge artifacts/webshop/experience_model/judge \\
        --source warm_start=artifacts/webshop/policy_sft_test_episodes.jsonl \\
        --generated benchmarks/results/fidelity_webshop.json --experience artifacts/webshop/experience_model_onpolicy \\
        --probe-train artifacts/webshop/judge_purchases_train.jsonl --out benchmarks/results/judge_webshop.json

Sources, all on test-split tasks: the scripted ``non_oracle``, ``near_miss`` and ``expert`` collected
exactly as ``scripts/fidelity_report.py`` collects them (same ``--episodes`` and ``--seed``: the same
episodes), ``near_miss`` once more per mistake kind (``near_miss_<kind>``: the agent forced to that
kind; it falls back to another kind in an episode where that one is impossible, e.g. a goal without
options), and any ``NAME=episodes.jsonl`` given with ``--source`` (e.g. the warm start's test episodes).

Per source, on every purchase (terminating step): ``tpr`` (= ``success_recall``), ``fpr``,
``success_precision``, ``balanced_acc``, ``acc``, ``n`` of

- ``judge``: the reward judge's verdict (``P(success) >= threshold``), what ``SyntheticEnv(reward="judge")``
  pays on a step the experience model ends;
- ``probe`` (with ``--probe-train``): the cheap alternative, logistic regression on frozen MiniLM
  sentence embeddings ``[u, v, |u - v|, u * v]`` of the same text pair, fit on those train purchases;
- ``generated``: the experience model's own reward, recomputed from a ``scripts/fidelity_report.py``
  result (``--generated``: its ``n``, precision and recall) where that result holds the same purchases
  (same count and successes), else measured here with ``--experience`` (teacher-forced ``predict``, as the
  synthetic env asks); ``generated_from`` says which.

``--source NAME=a.jsonl,b.jsonl`` pools several files into one source (e.g. the test episodes of RL
policies: the purchases a policy being trained makes). With every source asked the judge's inputs
are its text pairs, nothing else, so the figures hold for ``SyntheticEnv(reward="judge")`` on every
step the experience model ends (its done accuracy on purchases is in the fidelity report).

``pooled``: ``near_miss`` + ``non_oracle`` together; ``targets``: issue 38's acceptance checks.

ALFWorld (``--env alfworld --verbs move use take``): the judged steps are every ``move`` / ``use`` /
``take`` of the sources' episodes (a game is won by one of them, or not: the wrong placements a
synthetic env must not pay), with a per-verb breakdown; the scripted sources are ALFWorld's::

    python scripts/judge_report.py --env alfworld --verbs move use take --judge artifacts/alfworld/reward_judge \
        --scripted expert near_miss --episodes 40 --source warm_start=artifacts/alfworld/policy_sft_test_episodes.jsonl \
        --experience artifacts/alfworld/experience_model_onpolicy --out benchmarks/results/judge_alfworld.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from datamodules.terminal_steps import terminal_examples
from dreamgym.agents import register_agent
from dreamgym.collect import collect_trajectories
from dreamgym.fidelity import binary_metrics
from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.modeling.judge import JUDGE_DIR, JUDGE_FILE, RewardJudge, judge_inputs
from dreamgym.schema import read_trajectories

KINDS = ("wrong_option", "over_price", "too_early", "look_alike")
SCRIPTED = ("non_oracle", "near_miss", "expert")


def _register_forced_kinds() -> None:
    from dreamgym.envs.webshop.agents import NearMissAgent

    for kind in KINDS:
        register_agent(
            "webshop", f"near_miss_{kind}", lambda env=None, _k=kind, **kw: NearMissAgent(modes=(_k,), **kw)
        )


def collect_sources(args) -> dict[str, list]:
    """Held-out episodes per source (``NAME=a.jsonl,b.jsonl`` pools files)."""
    if args.kinds:
        _register_forced_kinds()
    names = list(args.scripted) + [f"near_miss_{k}" for k in args.kinds]
    out = {}
    for name in names:
        trajs = collect_trajectories(args.env, "test", 0, 0, mix={name: args.episodes}, seed=args.seed,
                                     teacher=False, batch_size=16)  # fmt: skip
        out[name] = trajs
    for spec in args.source:
        name, _, paths = spec.partition("=")
        trajs = [t for p in paths.split(",") if p for t in read_trajectories(p)]
        if not paths or any(t.split != "test" for t in trajs):
            raise SystemExit(
                f"--source {spec!r}: expected NAME=episodes.jsonl[,more.jsonl] of test-split episodes only"
            )
        out[name] = trajs
    return out


def experience_verdicts(experience, examples: list[dict]) -> list[bool]:
    """Whether the experience model's own generated reward calls each judged step a success
    (teacher-forced, the synthetic env's ``predict``, retrieval excluding the step's own episode; a parse
    failure counts as a predicted failure)."""
    from dreamgym.modeling.experience import ExperienceQuery
    from dreamgym.schema import is_success

    queries = [ExperienceQuery(e["instruction"], e["history"], e["state"], e["action"], exclude_id=e["trajectory_id"])
               for e in examples]  # fmt: skip
    return [p.ok and is_success(p.reward, p.done) for p in experience.predict(queries)]


def _counts(pred: list[bool], real: list[bool]) -> tuple[int, int, int, int]:
    tp = sum(p and r for p, r in zip(pred, real, strict=True))
    fp = sum(p and not r for p, r in zip(pred, real, strict=True))
    fn = sum(r and not p for p, r in zip(pred, real, strict=True))
    return tp, fp, len(real) - tp - fp - fn, fn


def generated_counts(row: dict, pos: int, neg: int) -> tuple[int, int, int, int]:
    """``(tp, fp, tn, fn)`` of a fidelity-report row's generated reward, from its precision and recall on
    ``pos`` successful and ``neg`` failed purchases."""
    tp = round(row["success_recall"] * pos)
    fp = round(tp / row["success_precision"] - tp) if row["success_precision"] > 0 else 0
    return tp, fp, neg - fp, pos - tp


def _texts(examples: list[dict], env: str = "webshop") -> tuple[list[str], list[str]]:
    pairs = [judge_inputs(e["instruction"], e["state"], e["action"], env, e["history"]) for e in examples]
    return [a for a, _ in pairs], [b for _, b in pairs]


class EmbeddingProbe:
    """Logistic regression on frozen MiniLM embeddings ``[u, v, |u - v|, u * v]`` of the judge's text pair."""

    def __init__(self, l2: float = 1e-3, epochs: int = 300, env: str = "webshop"):
        from dreamgym.retrieval.encoders import MiniLMEncoder

        self.encoder, self.l2, self.epochs, self.env = MiniLMEncoder(batch_size=64), l2, epochs, env

    def features(self, examples: list[dict]) -> torch.Tensor:
        a, b = _texts(examples, self.env)
        u, v = (torch.from_numpy(self.encoder.encode(t)) for t in (a, b))
        return torch.cat([u, v, (u - v).abs(), u * v], dim=1)

    def fit(self, examples: list[dict]) -> EmbeddingProbe:
        x, y = self.features(examples), torch.tensor([e["label"] for e in examples])
        self.mean, self.std = x.mean(0), x.std(0) + 1e-6
        x = (x - self.mean) / self.std
        self.w, self.b = torch.zeros(x.shape[1], requires_grad=True), torch.zeros(1, requires_grad=True)
        opt = torch.optim.LBFGS([self.w, self.b], max_iter=self.epochs, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ self.w + self.b, y)
            loss = loss + self.l2 * self.w.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return self

    @torch.no_grad()
    def predict_proba(self, examples: list[dict]) -> list[float]:
        x = (self.features(examples) - self.mean) / self.std
        return torch.sigmoid(x @ self.w + self.b).tolist()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", required=True, help="a saved judge, or an experience model holding judge/")
    ap.add_argument(
        "--env", default="webshop", choices=["webshop", "alfworld"], help="the env of the sources"
    )
    ap.add_argument("--verbs", nargs="*", default=None,
                    help="judge every step whose command starts with one of these too (ALFWorld: move use take)")  # fmt: skip
    ap.add_argument("--scripted", nargs="*", default=list(SCRIPTED), help="scripted sources to collect")
    ap.add_argument(
        "--kinds",
        nargs="*",
        default=None,
        help="WebShop near_miss mistake kinds, one source each (default: all)",
    )
    ap.add_argument("--episodes", type=int, default=200, help="test episodes per scripted source")
    ap.add_argument("--seed", type=int, default=1, help="collection seed (fidelity_report.py's default)")
    ap.add_argument("--source", action="append", default=[], help="NAME=episodes.jsonl (test split)")
    ap.add_argument("--generated", default=None, help="a scripts/fidelity_report.py result to set beside")
    ap.add_argument(
        "--experience",
        default=None,
        help="an experience model whose generated reward is measured "
        "here on the sources --generated lacks (or holds for other purchases)",
    )
    ap.add_argument("--experience-sources", nargs="*", default=None, help="only these sources get --experience "
                    "(default: every source --generated lacks; generation costs about 0.5 s a purchase on a CPU)")  # fmt: skip
    ap.add_argument(
        "--probe-train", nargs="*", default=[], help="train-split files to fit the embedding probe on"
    )
    ap.add_argument("--probe-examples", type=int, default=8000, help="train purchases the probe is fit on")
    ap.add_argument("--out", default="benchmarks/results/judge_webshop.json")
    args = ap.parse_args(argv)
    if args.kinds is None:
        args.kinds = list(KINDS) if args.env == "webshop" else []
    elif args.kinds and args.env != "webshop":
        raise SystemExit(
            f"--kinds {args.kinds}: forced near-miss kinds exist for WebShop only, not {args.env!r}"
        )
    import dreamgym.envs  # noqa: F401  (registers the judge's views of each env)

    path = Path(args.judge)
    judge = RewardJudge.from_pretrained(path if (path / JUDGE_FILE).is_file() else path / JUDGE_DIR)
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    t0 = time.time()
    sources = collect_sources(args)
    probe = None
    if args.probe_train:
        train = terminal_examples(
            [t for p in args.probe_train for t in read_trajectories(p) if t.split == "train"],
            verbs=args.verbs,
        )
        train = random.Random(0).sample(train, min(args.probe_examples, len(train)))
        probe = EmbeddingProbe(env=args.env).fit(train)
    generated = json.loads(Path(args.generated).read_text()) if args.generated else {}
    experience = None
    if args.experience:
        from dreamgym.modeling.experience import ExperienceModel

        experience = ExperienceModel.from_pretrained(args.experience, batch_size=16)
    rows, pooled = {}, {"generated": [0] * 4, "judge": [0] * 4, "probe": [0] * 4}
    for name, trajs in sources.items():
        examples = terminal_examples(trajs, dedupe=False, verbs=args.verbs)
        real = [e["label"] > 0.5 for e in examples]
        probs = judge.predict_proba([e["instruction"] for e in examples], [e["state"] for e in examples],
                                    [e["action"] for e in examples], histories=[e["history"] for e in examples])  # fmt: skip
        row = {"n": len(examples), "real_success_rate": float(np.mean(real)) if real else float("nan")}
        verdicts, counts = {"judge": [p >= judge.threshold for p in probs]}, {}
        if probe is not None:
            verdicts["probe"] = [p >= 0.5 for p in probe.predict_proba(examples)]
        same = name in generated and round(generated[name]["n"]) == len(real) and round(
            generated[name]["real_success_rate"] * len(real)) == sum(real)  # fmt: skip
        if same:  # the same purchases (scripted sources are collected with the same seed)
            counts["generated"] = generated_counts(generated[name], sum(real), len(real) - sum(real))
            row["generated_from"] = args.generated
        elif experience is not None and (args.experience_sources is None or name in args.experience_sources):
            verdicts["generated"] = experience_verdicts(experience, examples)
            row["generated_from"] = args.experience
        counts.update({key: _counts(v, real) for key, v in verdicts.items()})
        if args.verbs:  # per verb: which kind of step is misjudged
            verb_of = [e["action"].split()[0] for e in examples]
            row["per_verb"] = {
                verb: {key: binary_metrics(*_counts([x for x, w in zip(v, verb_of, strict=True) if w == verb],
                                                    [r for r, w in zip(real, verb_of, strict=True) if w == verb]))
                       for key, v in verdicts.items()}
                for verb in sorted(set(verb_of))
            }  # fmt: skip
        for key, c in counts.items():
            row[key] = binary_metrics(*c)
            if name in ("near_miss", "non_oracle"):
                pooled[key] = [a + b for a, b in zip(pooled[key], c, strict=True)]
        rows[name] = row
        print(f"[judge] {name}: n={len(examples)} judge={json.dumps({k: round(v, 3) for k, v in row['judge'].items()})}",
              flush=True)  # fmt: skip
    if any(sum(c) for c in pooled.values()):
        rows["pooled_near_miss_non_oracle"] = {k: binary_metrics(*c) for k, c in pooled.items() if sum(c)}
    targets = {}
    for s in ("warm_start", "non_oracle"):
        if s in rows:
            j = rows[s]["judge"]
            targets[f"{s}_precision_and_recall_ge_0.9"] = bool(
                j["success_precision"] >= 0.9 and j["success_recall"] >= 0.9
            )
    if "pooled_near_miss_non_oracle" in rows:
        targets["pooled_balanced_acc_ge_0.9"] = bool(
            rows["pooled_near_miss_non_oracle"]["judge"]["balanced_acc"] >= 0.9
        )
    meta = {**result_meta("scripts/judge_report.py", argv), "judge": str(args.judge), "judge_settings": judge.settings(),
            "generated_file": args.generated, "experience": args.experience, "wall_s": round(time.time() - t0, 1)}  # fmt: skip
    result = {"_meta": meta, **rows, "targets": targets}
    md = markdown(result)
    write_result(args.out, result, indent=2, markdown=md)
    print(md)
    return result


def markdown(result: dict) -> str:
    models = ("generated", "judge", "probe")
    cols = ("success_precision", "tpr", "fpr", "balanced_acc")
    head = ["source", "judged steps", "real success"] + [
        f"{m} {c}" for m in models for c in ("precision", "recall (TPR)", "FPR", "bal. acc")
    ]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, row in result.items():
        if name.startswith("_") or name == "targets":
            continue
        n = f"{row['n']}" if "n" in row else f"{int(row['judge']['n'])}"
        rate = f"{row['real_success_rate']:.3f}" if "real_success_rate" in row else ""
        cells = [name, n, rate]
        for m in models:
            cells += [f"{row[m][c]:.3f}" if m in row else "" for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
        for verb, by_model in row.get("per_verb", {}).items():
            some = next(iter(by_model.values()))
            cells = [f"{name} / {verb}", f"{int(some['n'])}", ""]
            for m in models:
                cells += [f"{by_model[m][c]:.3f}" if m in by_model else "" for c in cols]
            lines.append("| " + " | ".join(cells) + " |")
    meta = result["_meta"]
    targets = ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in result["targets"].items())
    return (
        "\n".join(lines)
        + f"\n\nTargets: {targets}\n\nCommand: `{meta['command']}` (commit {meta['commit'][:10]})\n"
    )


if __name__ == "__main__":
    main()
