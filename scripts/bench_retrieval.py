"""usearch top-k latency, recall against exact search, and index memory as the replay buffer grows.

    python scripts/bench_retrieval.py --sizes 10000 100000 1000000 --out benchmarks/results/retrieval_webshop.json

Vectors are the replay buffer's own embeddings (:meth:`dreamgym.retrieval.ReplayBuffer.embed`, the
configured hashing encoder, 512 dims) of the real WebShop train transitions in ``--train``; sizes beyond
their count are filled with jittered copies (a real vector plus Gaussian noise of ``--jitter`` per
dimension, renormalised), so the index holds clusters of near-duplicates as a buffer with written-back
synthetic transitions does. Queries are ``--queries`` held-out test transitions (``--test``), asked
one at a time and in batches of ``--batch`` (the synthetic env's slots). Exact search is a numpy
matrix product over the same vectors; recall@k is the share of the exact top-k that usearch returns.
With ``--bucket-radius R`` the index is a :class:`~dreamgym.retrieval.index.BucketIndex` (leaders within
cosine distance R in the usearch graph, their buckets scored exactly), measured per ``--probe``.

With ``--distinct`` the vectors are distinct real transitions only: ``--train`` files (several may be given)
are read in order, a (state, action) pair seen before is dropped, and a size above the distinct count is an
error rather than filled with jitter. A million distinct transitions come from scripted agents playing the
real env's train split (``scripts/collect_retrieval_1m.sh``, 20 chunks of 20,000 episodes, resumable): the 2,524
human-goal tasks saturate at 485,579 distinct pairs in 2.06 M transitions, the synthetic-goal tasks lift that to 653,808 and
the ``random_queries`` policy (queries of any instruction words, so results pages the span-query random agent never
reaches) the rest::

    scripts/collect_retrieval_1m.sh
    python scripts/bench_retrieval.py --distinct --train $(ls artifacts/retrieval/train_1m_part*.jsonl | sort -V) \
        --test artifacts/webshop/offline_test.jsonl --sizes 1000000 --out benchmarks/results/retrieval_webshop_1m_distinct.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dreamgym.lab.provenance import result_meta, write_result
from dreamgym.retrieval import ReplayBuffer
from dreamgym.retrieval.index import BucketIndex, VectorIndex, grow_vectors
from dreamgym.schema import iter_transitions, read_trajectories


def _vectors(path: str, limit: int | None = None) -> np.ndarray:
    ts = list(iter_transitions(read_trajectories(path)))[:limit]
    return ReplayBuffer().embed([t.state for t in ts], [t.action for t in ts])


def distinct_vectors(paths: list[str], limit: int, chunk: int = 20_000) -> tuple[np.ndarray, dict]:
    """Embeddings of the first ``limit`` distinct (state, action) pairs of the transitions in ``paths`` (read in
    order, streamed in chunks), and counts of what was read: transitions, distinct ones kept, duplicates."""
    import hashlib

    buffer, seen, out = ReplayBuffer(), set(), []
    pending: list[tuple[str, str]] = []
    read = 0

    def flush() -> None:
        if pending:
            out.append(buffer.embed([s for s, _ in pending], [a for _, a in pending]))
            pending.clear()

    for path in paths:
        for t in iter_transitions(read_trajectories(path)):
            read += 1
            key = hashlib.blake2b(f"{t.state}\x00{t.action}".encode(), digest_size=16).digest()
            if key in seen:
                continue
            seen.add(key)
            pending.append((t.state, t.action))
            if len(pending) >= chunk:
                flush()
            if len(seen) >= limit:
                break
        if len(seen) >= limit:
            break
    flush()
    db = np.concatenate(out) if out else np.zeros((0, buffer.encoder.dim * 2), np.float32)
    return db, {"transitions_read": read, "distinct": len(db), "duplicates_dropped": read - len(seen)}


def _exact_topk(db: np.ndarray, q: np.ndarray, k: int, chunk: int = 200_000) -> np.ndarray:
    best_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), k), dtype=np.int64)
    for start in range(0, len(db), chunk):
        sims = q @ db[start : start + chunk].T
        part = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
        s = np.take_along_axis(sims, part, axis=1)
        cand_s, cand_i = np.concatenate([best_s, s], 1), np.concatenate([best_i, part + start], 1)
        top = np.argsort(-cand_s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(cand_s, top, 1), np.take_along_axis(cand_i, top, 1)
    return best_i


def measure(
    db: np.ndarray,
    q: np.ndarray,
    k: int,
    batch: int,
    expansion_search: list[int | None] = (None,),
    connectivity: int | None = None,
    expansion_add: int | None = None,
    src: np.ndarray | None = None,
    bucket_radius: float | None = None,
    probes: list[int] = (8,),
) -> list[dict]:
    """Build once (time, memory), then per search beam width in ``expansion_search`` (None: usearch's
    default) and, for a :class:`BucketIndex` (``bucket_radius``), per number of probed buckets in
    ``probes``: latency (single and batched queries) and recall@k against exact search, and its speed-up.

    With ``src`` (per row, the real transition it copies: :func:`grow_vectors`), also the recall of the
    real transitions behind the exact top-k (jittered copies carry the same transition's text, so which
    copy is returned does not change what the experience model reads), and the mean cosine similarity of
    the returned top-k against the exact top-k's."""
    if bucket_radius:
        index = BucketIndex(
            db.shape[1], bucket_radius, connectivity=connectivity, expansion_add=expansion_add
        )
        graph = index.leaders
    else:
        index = VectorIndex(db.shape[1], connectivity=connectivity, expansion_add=expansion_add)
        graph, probes = index, [None]
    t0 = time.perf_counter()
    index.add(np.arange(len(db)), db)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact = _exact_topk(db, q, k)
    exact_ms = (time.perf_counter() - t0) / len(q) * 1e3
    common = {
        "n": len(db),
        "connectivity": int(graph.connectivity),
        "expansion_add": int(graph.expansion_add),
        **({"bucket_radius": bucket_radius, "buckets": index.buckets} if bucket_radius else {}),
        "build_s": round(build, 2),
        "index_mb": round(len(index.to_bytes()) / 2**20, 1),
        "vectors_mb": round(db.nbytes / 2**20, 1),
        "exact_numpy_ms_per_query": round(exact_ms, 3),
    }
    rows = []
    for ef, probe in [(ef, p) for ef in expansion_search for p in probes]:
        if ef is not None:
            index.expansion_search = ef
        if probe is not None:
            index.probe = probe
        t0 = time.perf_counter()
        for row in q:
            index.search(row[None], k)
        single_ms = (time.perf_counter() - t0) / len(q) * 1e3
        t0 = time.perf_counter()
        got = np.concatenate([index.search(q[i : i + batch], k)[0] for i in range(0, len(q), batch)])
        batch_ms = (time.perf_counter() - t0) / -(-len(q) // batch) * 1e3
        recall = float(np.mean([len(set(g) & set(e)) / k for g, e in zip(got, exact, strict=True)]))
        extra = {}
        if src is not None:
            extra[f"recall@{k}_real_transitions"] = round(float(np.mean(
                [len(set(src[g]) & set(src[e])) / len(set(src[e])) for g, e in zip(got, exact, strict=True)])), 4)  # fmt: skip
            sims = lambda ids: np.einsum("qkd,qd->qk", db[ids], q).mean()  # noqa: E731
            extra[f"similarity@{k}_vs_exact"] = round(float(sims(got) / sims(exact)), 5)
        rows.append(
            {
                **common,
                "expansion_search": index.expansion_search,
                **({"probe": probe} if probe is not None else {}),
                "single_query_ms": round(single_ms, 3),
                f"batch{batch}_query_ms": round(batch_ms, 3),
                "speedup_vs_exact": round(exact_ms / single_ms, 1),
                f"recall@{k}": round(recall, 4),
                **extra,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", nargs="+", default=["artifacts/webshop/offline_train.jsonl"])
    ap.add_argument(
        "--distinct",
        action="store_true",
        help="distinct real transitions only (no jittered filler; a size above their count is an error)",
    )
    ap.add_argument("--test", default="artifacts/webshop/offline_test.jsonl")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--jitter", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--expansion-search",
        type=int,
        nargs="+",
        default=[None],
        help="search beam widths to measure on each built index (default: usearch's, 64)",
    )
    ap.add_argument("--connectivity", type=int, default=None, help="graph degree (default: usearch's, 16)")
    ap.add_argument(
        "--expansion-add", type=int, default=None, help="build beam width (default: usearch's, 128)"
    )
    ap.add_argument(
        "--bucket-radius",
        type=float,
        default=None,
        help="index buckets of near-duplicates (BucketIndex radius, a cosine distance; default: plain graph)",
    )
    ap.add_argument(
        "--probe", type=int, nargs="+", default=[8], help="buckets scored per query (BucketIndex)"
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    data: dict = {}
    if args.distinct:
        base, data = distinct_vectors(args.train, max(args.sizes))
        if len(base) < max(args.sizes):
            raise SystemExit(
                f"error: --sizes {max(args.sizes)} but --train {' '.join(args.train)} holds {len(base)} distinct "
                f"(state, action) pairs ({data['transitions_read']} transitions read); collect more episodes "
                "(the module docstring has the command) or ask for a smaller size"
            )
    else:
        base = np.concatenate([_vectors(p) for p in args.train])
    queries = _vectors(args.test, args.queries)
    rows = []
    for n in args.sizes:
        db, src = (base[:n], None) if args.distinct else grow_vectors(base, n, args.jitter, rng)
        for row in measure(db, queries, args.k, args.batch, args.expansion_search, args.connectivity,
                           args.expansion_add, src, args.bucket_radius, args.probe):  # fmt: skip
            row = {"real_vectors": min(n, len(base)), **row}
            print(json.dumps(row), flush=True)
            rows.append(row)
    result = {
        "_meta": result_meta("scripts/bench_retrieval.py", argv),
        "dims": int(base.shape[1]),
        "data": {"train": args.train, "distinct": args.distinct, **data},
        "rows": rows,
    }
    if args.out:
        write_result(args.out, result, indent=1)
    return result


if __name__ == "__main__":
    main()
