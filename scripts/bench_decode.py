"""The experience model's decoding, side by side: ``model.generate`` with a static cache against the
package's decoding loop (``cache_implementation="slots"``), on the same prompts in the same process.

    python scripts/bench_decode.py --experience artifacts/webshop_long/experience_model_onpolicy \
        --episodes artifacts/webshop_long/offline_test.jsonl --batches 4 --rounds 2 \
        --out benchmarks/results/decode_webshop.json

Prompts: the experience model's own (retrieval included) for every step of the held-out episodes in
``--episodes``, shuffled with a fixed seed, ``--batch`` rows per call (the synthetic env's slots); each
round runs every batch once per engine, the engines alternating so a change in the machine's load
touches each. Reported per engine: wall seconds, generated tokens, tokens/s; and how many of its outputs
are the same text as the first engine's (greedy decoding with the same numerics: all should be) and
carry the same reward and done.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from profile_decode import experience_parser  # noqa: E402

from dreamgym.modeling.experience import ExperienceModel, ExperienceQuery  # noqa: E402
from dreamgym.provenance import result_meta, write_result  # noqa: E402
from dreamgym.schema import read_trajectories  # noqa: E402

ENGINES = ("static", "slots")


def main(argv: list[str] | None = None) -> dict:
    ap = experience_parser(__doc__)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--engines", nargs="+", default=list(ENGINES),
                    help="static and/or slots; the first is the reference")  # fmt: skip
    args = ap.parse_args(argv)
    engines = tuple(args.engines)
    torch.manual_seed(0)
    em = ExperienceModel.from_pretrained(args.experience, batch_size=args.batch)
    queries = [
        ExperienceQuery(t.instruction, [x.action for x in t.transitions[: tr.step]], tr.state, tr.action)
        for t in read_trajectories(args.episodes)
        for tr in t.transitions
    ]
    random.Random(0).shuffle(queries)
    batches = [em.prompts(queries[i * args.batch : (i + 1) * args.batch]) for i in range(args.batches)]
    structured = em.decoding == "structured"
    em.generate(batches[0][:2], structured=structured)  # warm-up
    wall = dict.fromkeys(engines, 0.0)
    texts: dict[str, list[str]] = {e: [] for e in engines}
    for rnd in range(args.rounds):
        for prompts in batches:
            for engine in engines if rnd % 2 == 0 else engines[::-1]:
                em.cache_implementation = engine
                t0 = time.perf_counter()
                out = em.generate(prompts, structured=structured)
                wall[engine] += time.perf_counter() - t0
                if rnd == 0:
                    texts[engine] += out
    tok = em.tokenizer
    ref = engines[0]
    verdicts = {e: [(o.reward, o.done) for o in em.parse(texts[e])] for e in engines}
    per = {}
    for e in engines:
        tokens = sum(len(tok.encode(t, add_special_tokens=False)) for t in texts[e]) * args.rounds
        per[e] = {
            "wall_s": round(wall[e], 2),
            "generated_tokens": tokens,
            "tokens_per_s": round(tokens / wall[e], 1),
            "same_outputs_as_first": sum(a == b for a, b in zip(texts[ref], texts[e], strict=True)),
            "same_reward_done_as_first": sum(a == b for a, b in zip(verdicts[ref], verdicts[e], strict=True)),
        }
    result = {
        "_meta": result_meta("scripts/bench_decode.py", argv),
        "rows": args.batch,
        "batches": args.batches,
        "rounds": args.rounds,
        "threads": torch.get_num_threads(),
        "engines": per,
        "speedup_vs_first": {e: round(wall[ref] / wall[e], 3) for e in engines},
        "outputs": len(texts[ref]),
    }
    print(result)
    if args.out:
        write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
