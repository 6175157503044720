"""Experience-model ablations of the observability work, same model size, data size and steps.

    python scripts/ablate_experience.py --steps 800 --variants full old_state verdict old_mix

Variants (each differs from ``full`` in one thing):

- ``full``: observable item pages, checking rationale, the new offline mix (expert 600, random 200,
  non_oracle 800, near_miss 800);
- ``old_state``: the older item page (``item_facts=False``: listed price only, no category/attributes);
- ``verdict``: the older rationale that states verdicts (``rationale="verdict"``);
- ``old_mix``: expert 600 + random 200 only (84 % of purchases succeed).

Every variant uses the main job's tokenizer (``--tokenizer``) and ``configs/webshop_experience_sft.yaml``
with ``--steps`` steps, then ``scripts/fidelity_report.py`` on held-out test episodes collected with the
variant's own page format. Stages write under ``--out-dir/<variant>/`` and are skipped when their output
exists (a rerun resumes; an interrupted SFT continues from its last checkpoint); the reports land in
``benchmarks/results/ablation_<variant>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = {
    "full": {"env_kwargs": {}, "teacher_kwargs": {}, "mix": {"non_oracle": 800, "near_miss": 800}},
    "old_state": {"env_kwargs": {"item_facts": False}, "teacher_kwargs": {}, "mix": {"non_oracle": 800, "near_miss": 800}},
    "verdict": {"env_kwargs": {}, "teacher_kwargs": {"rationale": "verdict"}, "mix": {"non_oracle": 800, "near_miss": 800}},
    "old_mix": {"env_kwargs": {}, "teacher_kwargs": {}, "mix": {}},
}  # fmt: skip


def _data(out: Path, split: str, n_expert: int, n_random: int, v: dict) -> Path:
    path = out / f"offline_{split}.jsonl"
    if not path.exists():
        from dreamgym.collect import collect_trajectories

        tmp = path.with_suffix(".jsonl.tmp")
        tmp.unlink(missing_ok=True)
        collect_trajectories(
            "webshop", split, n_expert, n_random, out=tmp, seed=0, mix=v["mix"] if split == "train" else None,
            env_kwargs=v["env_kwargs"], teacher_kwargs=v["teacher_kwargs"],
        )  # fmt: skip
        tmp.rename(path)
    return path


def run(variant: str, args) -> Path:
    v, out = VARIANTS[variant], Path(args.out_dir) / variant
    out.mkdir(parents=True, exist_ok=True)
    train, test = _data(out, "train", 600, 200, v), _data(out, "test", 60, 0, v)
    from dreamgym.stages import fit_stage

    model = fit_stage(
        "configs/webshop_experience_sft.yaml",
        [f"--model.init_args.lm.init_args.tokenizer_path={args.tokenizer}",
         f"--data.init_args.train_files=[{train}]", f"--data.init_args.val_files=[{test}]",
         f"--trainer.max_steps={args.steps}", f"--model.init_args.lr_scheduler.init_args.total_steps={args.steps}",
         "--trainer.limit_val_batches=0"],
        out / "experience_model", "model.init_args.export_dir",
    )  # fmt: skip
    report = Path("benchmarks/results") / f"ablation_{variant}.json"
    if not report.exists():
        subprocess.run(
            [sys.executable, "scripts/fidelity_report.py", "--model", str(model), "--episodes", str(args.episodes),
             "--env-kwargs", json.dumps(v["env_kwargs"]), "--scripted", *args.scripted,
             "--steps-trajectories", str(args.steps_trajectories), "--open-loop", str(args.open_loop),
             "--out", str(report)],
            check=True,
        )  # fmt: skip
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--episodes", type=int, default=200, help="held-out episodes per scripted source")
    ap.add_argument(
        "--scripted",
        nargs="+",
        default=["non_oracle", "near_miss"],
        help="scripted held-out sources the fidelity report collects (roughly balanced purchases)",
    )
    ap.add_argument("--steps-trajectories", type=int, default=5, help="episodes for the all-step metrics")
    ap.add_argument("--open-loop", type=int, default=20, help="episodes for the open-loop check")
    ap.add_argument(
        "--tokenizer",
        default="artifacts/webshop_long/tokenizer",
        help="the long recipe's tokenizer (every variant shares it)",
    )
    ap.add_argument("--out-dir", default="artifacts/ablations")
    args = ap.parse_args(argv)
    for variant in args.variants:
        print(f"[ablation] {variant}: {run(variant, args)}", flush=True)


if __name__ == "__main__":
    main()
