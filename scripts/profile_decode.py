"""Where the experience model's decoding time goes: torch.profiler over one batched structured generation.

    python scripts/profile_decode.py --experience artifacts/webshop_long/experience_model_onpolicy \
        --out benchmarks/results/profile_decode_webshop.json

The prompts are the experience model's own (retrieval included) for the first steps of held-out expert
episodes in ``--episodes``; one warm-up generation, then one profiled generation of ``--batch`` rows (the
synthetic env's slots). Reported: wall time, generated tokens, decoding steps (the longest row: a batch
decodes until its last row ends), the top operators by self CPU time with their share, and the KV-cache
bytes one decoding step reads (rows x cache slots x layers x 2 x kv heads x head dim x 4 bytes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from dreamgym.modeling.experience import ExperienceModel, ExperienceQuery  # noqa: E402
from dreamgym.modeling.generation import encode_prompt  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402
from dreamgym.schema import read_trajectories  # noqa: E402


def experience_parser(description: str) -> argparse.ArgumentParser:
    """The options of the decoding scripts (this one and ``bench_decode.py``): the experience model, the
    held-out episodes its prompts come from, the rows per generation and the result file."""
    ap = argparse.ArgumentParser(description=description.split("\n\n")[0])
    ap.add_argument("--experience", default="artifacts/webshop_long/experience_model_onpolicy")
    ap.add_argument("--episodes", default="artifacts/webshop_long/offline_test.jsonl")
    ap.add_argument("--batch", type=int, default=16, help="rows per generation (the synthetic env's slots)")
    ap.add_argument("--out", default=None)
    return ap


def main(argv: list[str] | None = None) -> dict:
    ap = experience_parser(__doc__)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    em = ExperienceModel.from_pretrained(args.experience, batch_size=args.batch)
    queries = [
        ExperienceQuery(t.instruction, [], tr.state, tr.action)
        for t in read_trajectories(args.episodes)
        for tr in t.transitions[:3]
    ][: args.batch]
    prompts = em.prompts(queries)
    em.generate(prompts, structured=em.decoding == "structured")  # warm-up
    from torch.profiler import profile

    t0 = time.perf_counter()
    with profile() as prof:
        texts = em.generate(prompts, structured=em.decoding == "structured")
    wall = time.perf_counter() - t0
    tok = em.tokenizer
    gen = [len(tok.encode(t, add_special_tokens=False)) for t in texts]
    widths = [len(encode_prompt(tok, p)) for p in prompts]
    cfg = em.model.config
    slots = max(widths) + em.max_new_tokens
    kv_heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    kv_bytes = len(prompts) * slots * cfg.num_hidden_layers * 2 * kv_heads * head_dim * 4
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    ops = [
        {"op": e.key, "self_s": round(e.self_cpu_time_total / 1e6, 3), "share": round(e.self_cpu_time_total / total, 4),
         "calls": e.count}
        for e in events[: args.top]
    ]  # fmt: skip
    result = {
        "_meta": result_meta("scripts/profile_decode.py", argv),
        "rows": len(prompts),
        "prompt_tokens": {"min": min(widths), "max": max(widths)},
        "generated_tokens": {"mean": sum(gen) / len(gen), "max": max(gen)},
        "wall_s": round(wall, 2),
        "ms_per_decoding_step": round(wall / max(gen) * 1e3, 2),
        "kv_cache_mb_read_per_step": round(kv_bytes / 2**20, 1),
        "ops": ops,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "ops"}, indent=1))
    for o in ops:
        print(f"{o['share']:7.1%} {o['self_s']:8.3f} s {o['calls']:7d}  {o['op']}")
    if args.out:
        write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
