"""What a pretrained Hugging Face model costs and does on this machine (issue #41, item 3).

    python scripts/bench_pretrained.py --model artifacts/smollm2 --warm-start artifacts/webshop/policy_sft \\
        --tasks 50 --out benchmarks/results/pretrained_smollm2_cpu.json

Measures, in one process:
* **load**: seconds of ``LanguageModel(path=MODEL).build()`` (weights read from disk, FP32 head);
* **train**: tokens/s of a policy-SFT step (forward, behaviour-cloning loss, backward, AdamW) on
  ``--train-batch`` x ``--train-len`` tokens, full fine-tuning and LoRA (r 16, all linear layers), in
  the precision the CLI picks for this device (:func:`dreamgym.precision.auto_precision`);
* **generation**: new tokens/s of the package's decoding loop (:func:`dreamgym.modeling.generation.
  generate_ids`, greedy, ``--gen-len`` new tokens after a ``--prompt-len``-token prompt, prefill included) at
  batch 1 and 8, in fp32 and bf16 weights;
* **peak RSS** of the process after those (the evaluation below loads more models);
* **zero-shot held-out WebShop success**: the model and the warm start play test tasks ``0..tasks-1``
  greedily through the pipeline's evaluation path (:func:`dreamgym.collect.collect_policy_trajectories`,
  constrained decoding, the collector of ``--config``), both prompted with the warm start's
  ``policy_format.json`` (the same prompt text), with the paired exact McNemar test on success.

Speeds depend on what else the host runs: the result records the load average next to them.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from dreamgym.lab.provenance import report_result
from dreamgym.modeling import LanguageModel
from dreamgym.modeling.factory import LoRA

TIMED_STEPS = 3


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def measure_load(model_dir: str) -> dict:
    t0 = time.perf_counter()
    model, tok = LanguageModel(path=model_dir).build()
    seconds = time.perf_counter() - t0
    head = model.get_output_embeddings()
    return {
        "load_s": round(seconds, 2),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tok),
        "tied_embeddings": head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr(),
        "head": type(head).__name__,
    }


def measure_train(model_dir: str, batch: int, length: int, lora: bool, precision: str) -> dict:
    """Tokens/s of full SFT steps (after one untimed step) on random token ids."""
    from dreamgym.modeling.sft import bc_loss

    model, _ = LanguageModel(path=model_dir, lora=LoRA() if lora else None).build()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (batch, length), generator=gen)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, length // 2 :] = True
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    times = []
    for _ in range(TIMED_STEPS + 1):
        t0 = time.perf_counter()
        with autocast:
            logits = model(input_ids=ids).logits
        loss, _ = bc_loss(logits, ids, mask)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    timed = sum(times[1:])
    return {
        "precision": precision,
        "tokens_per_step": batch * length,
        "trainable_parameters": sum(p.numel() for p in trainable),
        "step_s": round(timed / TIMED_STEPS, 2),
        "tokens_per_s": round(batch * length * TIMED_STEPS / timed, 1),
    }


def measure_generation(model_dir: str, batch: int, prompt_len: int, new: int, dtype: str | None) -> dict:
    """New tokens/s of greedy decoding through ``generate_ids`` (no stop id: every row writes ``new``)."""
    from dreamgym.modeling.generation import generate_ids

    model, tok = LanguageModel(path=model_dir, dtype=dtype).build()
    model.eval()
    gen = torch.Generator().manual_seed(1)
    prompts = torch.randint(100, 40000, (batch, prompt_len), generator=gen).tolist()
    generate_ids(model, prompts[:1], 2, tok.pad_token_id, [-1], batch_size=batch)  # warm-up
    t0 = time.perf_counter()
    out = generate_ids(model, prompts, new, tok.pad_token_id, [-1], batch_size=batch)
    seconds = time.perf_counter() - t0
    assert all(len(r) == new for r in out)
    return {
        "dtype": dtype or "float32",
        "batch": batch,
        "prompt_tokens": prompt_len,
        "new_tokens": new,
        "seconds": round(seconds, 2),
        "new_tokens_per_s": round(batch * new / seconds, 2),
    }


def zero_shot(policies: dict[str, tuple[str, str | None]], warm_start: str, config: str, tasks: int,
              batch: int, max_steps: int) -> dict:  # fmt: skip
    """Each policy's greedy episodes on test tasks ``0..tasks-1``, prompted with the warm start's format."""
    from dreamgym.collect import collect_policy_trajectories
    from dreamgym.modeling.policy_format import PolicyFormat
    from dreamgym.rl.collector import collector_from_config
    from dreamgym.stats import mcnemar_exact

    fmt = PolicyFormat.load(warm_start)
    out, success = {}, {}
    for name, (path, dtype) in policies.items():
        collector = collector_from_config(config)
        if fmt is not None:
            collector.use_format(fmt, f"{warm_start}/policy_format.json")
        t0 = time.perf_counter()
        trajs, metrics = collect_policy_trajectories(
            path, "webshop", "test", list(range(tasks)), collector, greedy=True, teacher=False,
            batch_size=batch, max_steps=max_steps, dtype=dtype,
        )  # fmt: skip
        success[name] = [bool(t.success) for t in trajs]
        out[name] = {"model": path, "dtype": dtype or "as saved", **metrics,
                     "seconds": round(time.perf_counter() - t0, 1),
                     "first_actions": [t.transitions[0].action for t in trajs[:5] if t.transitions]}  # fmt: skip
        print(f"[bench_pretrained] {name}: {metrics}", flush=True)
    names = list(policies)
    if len(names) >= 2:
        out["paired"] = {
            f"{names[0]}_vs_{n}": mcnemar_exact(success[names[0]], success[n]) for n in names[1:]
        }
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a Hugging Face folder (python -m dreamgym import-gguf)")
    ap.add_argument("--warm-start", default="artifacts/webshop/policy_sft", help="the policy to compare with")
    ap.add_argument("--config", default="configs/webshop_grpo.yaml", help="RL config whose collector is used")
    ap.add_argument("--tasks", type=int, default=50, help="held-out test tasks 0..N-1 (0: no evaluation)")
    ap.add_argument("--eval-batch", type=int, default=25, help="env slots of the evaluation")
    ap.add_argument("--eval-dtype", default="bfloat16", help="dtype both policies are evaluated in")
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--train-batch", type=int, default=4)
    ap.add_argument("--train-len", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--out", default=None, help="result JSON (with the command and commit)")
    args = ap.parse_args(argv)
    from dreamgym.precision import auto_precision

    torch.manual_seed(0)
    precision = auto_precision("cpu")
    result = {
        "host": {
            "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        },  # fmt: skip
        "load": measure_load(args.model),
        "train": {
            mode: measure_train(args.model, args.train_batch, args.train_len, mode == "lora", precision)
            for mode in ("full", "lora")
        },
        "generation": [
            measure_generation(args.model, b, args.prompt_len, args.gen_len, dtype)
            for dtype in (None, "bfloat16")
            for b in (1, 8)
        ],
        "peak_rss_mb_speed_phases": _peak_rss_mb(),
    }
    result["host"]["loadavg_after_speed_phases"] = [round(x, 2) for x in os.getloadavg()]
    print(f"[bench_pretrained] {result}", flush=True)
    if args.tasks > 0:
        policies = {
            "pretrained_zero_shot": (args.model, args.eval_dtype),
            "warm_start": (args.warm_start, args.eval_dtype),
            "warm_start_fp32": (args.warm_start, None),
        }
        result["zero_shot_webshop"] = {
            "tasks": args.tasks, "split": "test", "config": args.config, "max_steps": args.max_steps,
            **zero_shot(policies, args.warm_start, args.config, args.tasks, args.eval_batch, args.max_steps),
        }  # fmt: skip
        result["peak_rss_mb"] = _peak_rss_mb()
    return report_result(result, args.out, "scripts/bench_pretrained.py", argv)


if __name__ == "__main__":
    main()
