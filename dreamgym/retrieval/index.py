"""Cosine vector indexes with integer keys: :class:`VectorIndex`, a thin wrapper over a usearch HNSW graph
(``usearch.index.Index``), and :class:`BucketIndex`, the same interface for buffers of near-duplicates.

Search is batched; rows with fewer hits than asked are padded with key ``-1`` and distance ``inf``
(usearch reports the number of real hits per row in ``BatchMatches.counts``).

Why two layouts: a replay buffer that grows by written-back synthetic transitions holds clusters of
near-duplicates (the same page visited again and again). An HNSW graph over such clusters spends its edges
inside them and loses the way between them: at a million vectors the plain graph finds 45-79 % of the exact
top-10 (``benchmarks/results/retrieval_webshop_1m*.json``), and re-ranking more of its candidates does not
help (it misses whole neighbourhoods). :class:`BucketIndex` keeps one *leader* per cluster in the graph
and scores the members of the nearest leaders' buckets exactly.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from usearch.index import Index

__all__ = ["VectorIndex", "BucketIndex", "load_index", "index_from_bytes", "grow_vectors"]


class VectorIndex:
    """Cosine vector index keyed by non-negative int64 keys.

    Args:
        ndim: vector size.
        dtype: storage type of vectors in the index ("f32", "f16" or "i8").
        expansion_add: usearch build-time beam width (None = usearch default).
        expansion_search: usearch search-time beam width (None = usearch default, 64); settable later
            through :attr:`expansion_search` (a search-time setting: no rebuild).
        connectivity: usearch graph degree (None = usearch default, 16).
    """

    def __init__(
        self,
        ndim: int,
        dtype: str = "f32",
        expansion_add: int | None = None,
        expansion_search: int | None = None,
        connectivity: int | None = None,
    ):
        if ndim < 1:
            raise ValueError(f"VectorIndex.ndim must be >= 1, got {ndim}")
        self.ndim, self.dtype = int(ndim), dtype
        self._index = Index(
            ndim=self.ndim,
            metric="cos",
            dtype=dtype,
            expansion_add=expansion_add,
            expansion_search=expansion_search,
            connectivity=connectivity,
        )

    @property
    def connectivity(self) -> int:
        """usearch's graph degree."""
        return int(self._index.connectivity)

    @property
    def expansion_add(self) -> int:
        """usearch's build-time beam width."""
        return int(self._index.expansion_add)

    @property
    def expansion_search(self) -> int:
        """usearch's search-time beam width: larger finds more of the exact neighbours, slower."""
        return int(self._index.expansion_search)

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        if int(value) < 1:
            raise ValueError(f"VectorIndex.expansion_search must be >= 1, got {value}")
        self._index.expansion_search = int(value)

    def __len__(self) -> int:
        return len(self._index)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Add ``vectors`` (N, ndim) under ``keys`` (N,)."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), -1)
        if vectors.shape[1] != self.ndim:
            raise ValueError(
                f"VectorIndex.add: vectors have {vectors.shape[1]} dims, the index has {self.ndim}"
            )
        if len(keys):
            self._index.add(keys, vectors, threads=1)

    def search(self, vectors: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``count`` neighbours of each row: ``(keys (N, count) int64, distances (N, count) float32)``.

        Distances are cosine distances (1 - cosine similarity), ascending; missing hits are ``-1``/``inf``.
        """
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.ndim)
        n = len(vectors)
        keys = np.full((n, count), -1, dtype=np.int64)
        dists = np.full((n, count), np.inf, dtype=np.float32)
        if n == 0 or count <= 0 or len(self) == 0:
            return keys, dists
        m = self._index.search(vectors, count, threads=1)
        if hasattr(m, "counts"):  # BatchMatches (several queries)
            counts = np.asarray(m.counts).reshape(n)
        else:  # Matches (a single query): keys hold only the real hits
            counts = np.array([len(m.keys)])
        got_k = np.asarray(m.keys).reshape(n, -1).astype(np.int64)
        got_d = np.asarray(m.distances).reshape(n, -1).astype(np.float32)
        for i in range(n):
            c = int(counts[i])
            keys[i, :c], dists[i, :c] = got_k[i, :c], got_d[i, :c]
        return keys, dists

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The stored vectors ``(N, ndim)`` float32 of ``keys`` (all must be present)."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        if len(keys) == 0:
            return np.zeros((0, self.ndim), dtype=np.float32)
        return np.asarray(self._index.get(keys, dtype=np.float32), dtype=np.float32).reshape(
            len(keys), self.ndim
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to ``path`` (a file)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._index.save(str(path))

    @classmethod
    def load(cls, path: str | os.PathLike, ndim: int, dtype: str = "f32") -> VectorIndex:
        """Read an index written by :meth:`save`."""
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"usearch index file {str(path)!r} does not exist; save a ReplayBuffer first"
            )
        out = cls(ndim, dtype)
        out._index.load(str(path))
        return out

    def to_bytes(self) -> bytes:
        """The serialised index (for checkpoints)."""
        return bytes(self._index.save())

    @classmethod
    def from_bytes(cls, data: bytes, ndim: int, dtype: str = "f32") -> VectorIndex:
        """Rebuild an index from :meth:`to_bytes` output."""
        out = cls(ndim, dtype)
        if data:
            out._index.load(bytearray(data))
        return out


_BUCKETS_MAGIC = b"DGBUCKETS1"


class BucketIndex:
    """Cosine index of buckets: a vector within cosine distance ``radius`` of a bucket's leader joins that
    bucket, else it leads a new one; the usearch graph (:class:`VectorIndex`) holds the leaders only. A
    search takes the ``probe`` leaders nearest each query from the graph and ranks every member of their
    buckets by exact cosine similarity. Leaders are assigned in chunks of ``chunk`` vectors (a chunk's
    vectors are compared with the leaders so far, then among themselves), so the buckets do not depend on
    how the vectors were batched into :meth:`add` calls beyond that.

    Args:
        ndim: vector size.
        radius: cosine distance from a leader within which a vector joins its bucket (> 0).
        probe: leaders whose buckets a search scores (more: closer to exact search, slower).
        dtype, expansion_add, expansion_search, connectivity: of the leaders' graph (:class:`VectorIndex`).
        chunk: vectors assigned to leaders at a time.

    Memory: the vectors (float32, normalised) plus the leaders' graph.
    """

    def __init__(
        self,
        ndim: int,
        radius: float = 0.1,
        probe: int = 8,
        dtype: str = "f32",
        expansion_add: int | None = None,
        expansion_search: int | None = None,
        connectivity: int | None = None,
        chunk: int = 4096,
    ):
        if not 0 < radius < 2:
            raise ValueError(f"BucketIndex.radius must be in (0, 2) (a cosine distance), got {radius}")
        if probe < 1 or chunk < 1:
            raise ValueError(f"BucketIndex.probe ({probe}) and chunk ({chunk}) must be >= 1")
        self.ndim, self.dtype, self.radius, self.probe, self.chunk = (
            int(ndim),
            dtype,
            float(radius),
            int(probe),
            int(chunk),
        )
        self.leaders = VectorIndex(ndim, dtype, expansion_add, expansion_search, connectivity)
        self._vecs = np.zeros((0, self.ndim), dtype=np.float32)  # row -> normalised vector
        self._keys = np.zeros(0, dtype=np.int64)  # row -> key
        self._n = 0
        self._row_of: dict[int, int] = {}
        self._members: dict[int, list[int]] = {}  # leader row -> member rows (the leader first)

    @property
    def expansion_search(self) -> int:
        """The leaders' graph's search beam width."""
        return self.leaders.expansion_search

    @expansion_search.setter
    def expansion_search(self, value: int) -> None:
        self.leaders.expansion_search = value

    def __len__(self) -> int:
        return self._n

    @property
    def buckets(self) -> int:
        """Number of buckets (leaders)."""
        return len(self._members)

    def _grow(self, n: int) -> None:
        if self._n + n <= len(self._vecs):
            return
        cap = max(self._n + n, 2 * len(self._vecs), 1024)
        self._vecs = np.resize(self._vecs, (cap, self.ndim))
        self._keys = np.resize(self._keys, cap)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Add ``vectors`` (N, ndim) under ``keys`` (N,), each to the bucket of a leader within ``radius``
        (the nearest found) or as a new leader."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), -1)
        if vectors.shape[1] != self.ndim:
            raise ValueError(
                f"BucketIndex.add: vectors have {vectors.shape[1]} dims, the index has {self.ndim}"
            )
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        self._grow(len(keys))
        for start in range(0, len(keys), self.chunk):
            self._add_chunk(keys[start : start + self.chunk], vectors[start : start + self.chunk])

    def _add_chunk(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        rows = np.arange(self._n, self._n + len(keys))
        self._vecs[rows], self._keys[rows] = vecs, keys
        self._n += len(keys)
        near, dist = self.leaders.search(vecs, 1)
        lead = np.where(dist[:, 0] <= self.radius, near[:, 0], -1)
        new_leaders: list[int] = []
        for i in np.flatnonzero(lead < 0):  # compare with the chunk's own new leaders first
            if new_leaders:
                sims = self._vecs[new_leaders] @ vecs[i]
                j = int(np.argmax(sims))
                if 1.0 - sims[j] <= self.radius:
                    lead[i] = new_leaders[j]
                    continue
            lead[i] = rows[i]
            new_leaders.append(int(rows[i]))
        if new_leaders:
            self.leaders.add(np.asarray(new_leaders), self._vecs[new_leaders])
            for r in new_leaders:
                self._members[r] = []
        for r, leader in zip(rows.tolist(), lead.tolist(), strict=True):
            self._members[leader].append(r)
            self._row_of[int(self._keys[r])] = r

    def search(self, vectors: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``count`` neighbours of each row among the ``probe`` nearest buckets' members: ``(keys (N,
        count) int64, cosine distances (N, count) float32)``, ascending; missing hits are ``-1``/``inf``."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.ndim)
        n = len(vectors)
        keys = np.full((n, count), -1, dtype=np.int64)
        dists = np.full((n, count), np.inf, dtype=np.float32)
        if n == 0 or count <= 0 or self._n == 0:
            return keys, dists
        q = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        leaders, _ = self.leaders.search(q, self.probe)
        for i in range(n):
            rows = np.concatenate([self._members[int(r)] for r in leaders[i] if r >= 0])
            d = 1.0 - self._vecs[rows] @ q[i]
            top = np.argsort(d, kind="stable")[:count]
            keys[i, : len(top)], dists[i, : len(top)] = self._keys[rows[top]], d[top]
        return keys, dists

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The stored (normalised) vectors ``(N, ndim)`` float32 of ``keys`` (all must be present)."""
        rows = [self._row_of[int(k)] for k in np.asarray(keys).reshape(-1)]
        return self._vecs[rows].copy()

    def to_bytes(self) -> bytes:
        """The serialised index: vectors, keys, bucket (leader row) of each row and the leaders' graph."""
        bucket = np.zeros(self._n, dtype=np.int64)
        for leader, rows in self._members.items():
            bucket[rows] = leader
        buf = io.BytesIO()
        np.savez(buf, vecs=self._vecs[: self._n], keys=self._keys[: self._n], bucket=bucket,
                 graph=np.frombuffer(self.leaders.to_bytes(), dtype=np.uint8),
                 config=np.array([self.radius, self.probe, self.chunk], dtype=np.float64))  # fmt: skip
        return _BUCKETS_MAGIC + buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, ndim: int, dtype: str = "f32") -> BucketIndex:
        """Rebuild an index from :meth:`to_bytes` output."""
        if not data.startswith(_BUCKETS_MAGIC):
            raise ValueError("BucketIndex.from_bytes: not a BucketIndex (no bucket header)")
        z = np.load(io.BytesIO(data[len(_BUCKETS_MAGIC) :]))
        radius, probe, chunk = z["config"].tolist()
        out = cls(ndim, radius, int(probe), dtype, chunk=int(chunk))
        out.leaders = VectorIndex.from_bytes(z["graph"].tobytes(), ndim, dtype)
        out._vecs, out._keys = z["vecs"].copy(), z["keys"].copy()
        out._n = len(out._keys)
        out._row_of = {int(k): r for r, k in enumerate(out._keys.tolist())}
        for r, leader in enumerate(z["bucket"].tolist()):
            out._members.setdefault(leader, []).append(r)
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to ``path`` (a file)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(self.to_bytes())


def index_from_bytes(data: bytes, ndim: int, dtype: str = "f32") -> VectorIndex | BucketIndex:
    """:meth:`BucketIndex.from_bytes` or :meth:`VectorIndex.from_bytes`, whichever wrote ``data``."""
    if bytes(data[: len(_BUCKETS_MAGIC)]) == _BUCKETS_MAGIC:
        return BucketIndex.from_bytes(bytes(data), ndim, dtype)
    return VectorIndex.from_bytes(data, ndim, dtype)


def load_index(path: str | os.PathLike, ndim: int, dtype: str = "f32") -> VectorIndex | BucketIndex:
    """Read an index written by either layout's ``save``."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"usearch index file {str(path)!r} does not exist; save a ReplayBuffer first")
    with open(path, "rb") as f:
        bucketed = f.read(len(_BUCKETS_MAGIC)) == _BUCKETS_MAGIC
    return (
        BucketIndex.from_bytes(Path(path).read_bytes(), ndim, dtype)
        if bucketed
        else VectorIndex.load(path, ndim, dtype)
    )


def grow_vectors(
    base: np.ndarray, n: int, jitter: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors: ``base`` (cut to ``n``), then jittered copies of random rows of it (the row
    plus Gaussian noise of ``jitter`` per dimension, renormalised); and, per row, the index of the
    ``base`` row it copies. Fills an index to a size beyond the real data with clusters of
    near-duplicates, as a buffer with written-back synthetic transitions holds (the retrieval and loop
    benchmarks)."""
    if n <= len(base):
        return base[:n], np.arange(n)
    src = rng.integers(0, len(base), n - len(base))
    extra = base[src] + rng.normal(0.0, jitter, (len(src), base.shape[1])).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    return np.concatenate([base, extra.astype(np.float32)]), np.concatenate([np.arange(len(base)), src])
