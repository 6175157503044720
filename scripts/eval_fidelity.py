"""Fidelity of a trained experience model on held-out real transitions (test-split tasks).

    python scripts/eval_fidelity.py --model artifacts/webshop/experience_model \\
        --data artifacts/webshop/offline_test.jsonl --max-examples 64 --open-loop 16 --out fidelity.json

Teacher-forced metrics (reward accuracy, success-step P/R/F1, done accuracy, next-state exact match and
token F1, parse failures) with the copy-the-current-state baseline, then the open-loop check (see
:mod:`dreamgym.fidelity`). ``--k 0`` evaluates the same model without retrieval. Prints one markdown
table row per run and writes all numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datamodules.trajectories import load_trajectory_files, make_examples  # noqa: E402
from dreamgym.fidelity import FIDELITY_KEYS, FidelityMeter, open_loop_eval  # noqa: E402
from dreamgym.modeling.experience import ExperienceModel  # noqa: E402


def _held_out_loss(em, examples: list[dict], batch_size: int) -> dict[str, float]:
    """Teacher-forced held-out ``loss_state`` / ``loss_reasoning`` (token means over all examples)."""
    import torch

    from dreamgym.modeling.sft import encode_examples, experience_sft_loss

    sums = {"state": 0.0, "reasoning": 0.0}
    counts = {"state": 0.0, "reasoning": 0.0}
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            enc = encode_examples(em.tokenizer, examples[i : i + batch_size], 4096)
            logits = em.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
            out = experience_sft_loss(logits, enc["input_ids"], enc["parts"])
            for part in sums:
                sums[part] += float(out[f"loss_{part}"] * out[f"n_{part}"])
                counts[part] += float(out[f"n_{part}"])
    return {f"heldout_loss_{p}": sums[p] / max(counts[p], 1.0) for p in sums}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="exported experience-model directory")
    ap.add_argument("--data", nargs="+", required=True, help="held-out trajectory JSONL (test-split tasks)")
    ap.add_argument("--max-examples", type=int, default=64, help="teacher-forced examples (random subset)")
    ap.add_argument(
        "--open-loop", type=int, default=16, help="trajectories for the open-loop check (0: skip)"
    )
    ap.add_argument("--k", type=int, default=None, help="override the number of retrieved neighbours")
    ap.add_argument("--max-new-tokens", type=int, default=480)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--done-only",
        action="store_true",
        help="only the episodes' final (done) transitions, e.g. a policy's purchases: success precision "
        "then says how often the model calls a real failure a success",
    )
    ap.add_argument(
        "--decoding",
        choices=["structured", "free"],
        default="structured",
        help="structured: the target layout is enforced (every output parses); free: plain greedy decoding",
    )
    ap.add_argument("--out", default=None, help="write the metrics here as JSON")
    ap.add_argument(
        "--loss-only",
        action="store_true",
        help="only the teacher-forced held-out losses (no generation; fast)",
    )
    args = ap.parse_args(argv)
    t0 = time.time()
    em = ExperienceModel.from_pretrained(
        args.model, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, decoding=args.decoding
    )
    if args.k is not None:
        em.fmt.k = args.k
    trajs = load_trajectory_files(args.data, "test")
    if any(t.split == "train" for t in trajs):
        ap.error(
            "--data holds train-split trajectories; fidelity is measured on held-out test-split tasks only"
        )
    examples = make_examples(trajs, em.fmt, em.buffer, "trajectory")
    if args.done_only:
        examples = [ex for ex in examples if ex["done"]]
    rng = random.Random(args.seed)
    examples = rng.sample(examples, min(args.max_examples, len(examples)))
    metrics = _held_out_loss(em, examples, args.batch_size)
    if args.loss_only:
        print(
            json.dumps({**metrics, "k": em.fmt.k, "n": len(examples), "wall_s": round(time.time() - t0, 1)})
        )
        return metrics
    meter = FidelityMeter()
    preds = em.parse(em.generate([ex["prompt"] for ex in examples], structured=args.decoding == "structured"))
    for ex, pred in zip(examples, preds, strict=True):
        meter.update(pred, ex["state"], ex["next_state"], ex["reward"], ex["done"])
    metrics.update(meter.compute())
    if args.open_loop:
        metrics.update(
            {
                k: v
                for k, v in open_loop_eval(em, rng.sample(trajs, min(args.open_loop, len(trajs)))).items()
                if k != "n"
            }
        )
    metrics.update(
        k=em.fmt.k,
        use_reasoning=em.fmt.use_reasoning,
        decoding=args.decoding,
        wall_s=round(time.time() - t0, 1),
        model=str(args.model),
    )
    cols = [*FIDELITY_KEYS, "open_loop_reward_acc", "open_loop_state_token_f1"]
    print("| model | k | " + " | ".join(cols) + " |")
    print("| " + " | ".join(["---"] * (len(cols) + 2)) + " |")
    print(
        f"| {args.model} | {em.fmt.k} | "
        + " | ".join(f"{metrics.get(c, float('nan')):.3f}" for c in cols)
        + " |"
    )
    print(f"n={int(metrics['n'])} teacher-forced examples, wall {metrics['wall_s']} s")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(metrics, indent=2))
    return metrics


if __name__ == "__main__":
    main()
