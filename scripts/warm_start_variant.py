"""Train the WebShop warm start again with other settings on the same data, and play it on held-out tasks.

    python scripts/warm_start_variant.py --shared artifacts/webshop_long --name fp32 \
        --arg=--trainer.precision=32-true --out benchmarks/results/warm_start_fp32.json

Answers "how much of the warm start's held-out success is the recipe and how much is this run": the
policy SFT stage of the pipeline (the same config, tokenizer and offline data as ``--shared``'s stages,
plus each ``--arg``) exports to ``<shared>/variants/<name>`` (a rerun resumes or reuses it), then plays the
first ``--tasks`` real test tasks greedily as the pipeline's evaluation does. With ``--reference`` (a
suite record, default the shared warm start's), the result pairs the two task by task (exact McNemar).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from dreamgym.collect import collect_policy_trajectories  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402
from dreamgym.rl.collector import collector_from_config  # noqa: E402
from dreamgym.schema import is_success  # noqa: E402
from dreamgym.stages import fit_stage  # noqa: E402
from dreamgym.stats import mcnemar_exact  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", required=True, help="a pipeline out_dir with offline_*.jsonl and tokenizer/")
    ap.add_argument("--name", required=True, help="the variant's folder under <shared>/variants")
    ap.add_argument(
        "--arg",
        action="append",
        default=[],
        dest="args",
        help="an extra CLI override of the policy SFT config (repeat for more)",
    )
    ap.add_argument("--config", default="configs/webshop_policy_sft.yaml")
    ap.add_argument("--env", default="webshop")
    ap.add_argument("--rl-config", default="configs/webshop_grpo.yaml", help="whose collector plays")
    ap.add_argument("--tasks", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--reference", default=None, help="FILE:RUN of a suite record to pair with")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    shared = Path(args.shared)
    missing = [
        p for p in ("offline_train.jsonl", "offline_test.jsonl", "tokenizer") if not (shared / p).exists()
    ]
    if missing:
        raise SystemExit(f"error: --shared {shared} lacks {missing}; run the pipeline's first stages there")
    t0 = time.perf_counter()
    policy = fit_stage(
        args.config,
        [f"--model.init_args.policy.init_args.tokenizer_path={shared / 'tokenizer'}",
         f"--data.init_args.train_files=[{shared / 'offline_train.jsonl'}]",
         f"--data.init_args.val_files=[{shared / 'offline_test.jsonl'}]", *args.args],
        shared / "variants" / args.name, "model.init_args.save_dir",
    )  # fmt: skip
    fit_s = time.perf_counter() - t0
    torch.manual_seed(0)
    trajs, metrics = collect_policy_trajectories(
        policy, args.env, "test", list(range(args.tasks)), collector_from_config(args.rl_config),
        greedy=True, teacher=False, batch_size=args.batch_size,
    )  # fmt: skip
    solved = {t.task_id: is_success(t.transitions[-1].reward, t.transitions[-1].done) for t in trajs}
    out = {
        "_meta": result_meta("scripts/warm_start_variant.py", argv if argv is not None else sys.argv[1:]),
        "variant": {"name": args.name, "args": args.args, "config": args.config},
        "metrics": metrics,
        "tasks": args.tasks,
        "fit_seconds": round(fit_s, 1),
        "eval_seconds": round(time.perf_counter() - t0 - fit_s, 1),
        "successes": {k: int(v) for k, v in sorted(solved.items())},
    }
    if args.reference:
        file, run = args.reference.rsplit(":", 1)
        rec = json.loads(Path(file).read_text())["runs"][run]
        ref = dict(zip(rec["task_ids"], (c == "1" for c in rec["successes"]), strict=True))
        common = [k for k in ref if k in solved]
        out["vs_reference"] = {
            "reference": args.reference,
            "reference_metrics": rec["metrics"],
            "paired_tasks": len(common),
            **mcnemar_exact([solved[k] for k in common], [ref[k] for k in common]),
        }
    write_result(args.out, out)
    print(json.dumps({k: v for k, v in out.items() if k not in ("_meta", "successes")}, indent=1))
    return out


if __name__ == "__main__":
    main()
