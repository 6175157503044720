"""A thin wrapper over a usearch cosine index (``usearch.index.Index``) with integer keys.

Search is batched; rows with fewer hits than asked are padded with key ``-1`` and distance ``inf``
(usearch reports the number of real hits per row in ``BatchMatches.counts``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from usearch.index import Index

__all__ = ["VectorIndex", "grow_vectors"]


class VectorIndex:
    """Cosine vector index keyed by non-negative int64 keys.

    Args:
        ndim: vector size.
        dtype: storage type of vectors in the index ("f32", "f16" or "i8").
        expansion_add: usearch build-time beam width (None = usearch default).
        expansion_search: usearch search-time beam width (None = usearch default, 64); settable later
            through :attr:`expansion_search` (a search-time setting: no rebuild).
        connectivity: usearch graph degree (None = usearch default, 16).
        rerank: candidates fetched per neighbour asked (1: usearch's top-k as is). With ``rerank = r > 1``
            a search asks the graph for ``r * k`` candidates and keeps the ``k`` of highest exact cosine
            similarity over the stored vectors: the graph then only has to land in the right
            neighbourhood, not rank its near-duplicates (settable later, like ``expansion_search``).
    """

    def __init__(
        self,
        ndim: int,
        dtype: str = "f32",
        expansion_add: int | None = None,
        expansion_search: int | None = None,
        connectivity: int | None = None,
        rerank: int = 1,
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
        self.rerank = rerank

    @property
    def rerank(self) -> int:
        """Candidates fetched per neighbour asked before the exact re-ranking (1: none)."""
        return self._rerank

    @rerank.setter
    def rerank(self, value: int) -> None:
        if int(value) < 1:
            raise ValueError(f"VectorIndex.rerank must be >= 1 (candidates per neighbour), got {value}")
        self._rerank = int(value)

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
        if self.rerank > 1:
            return self._reranked(vectors, count)
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

    def _reranked(self, vectors: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` of ``rerank * count`` candidates, re-ranked by exact cosine distance."""
        rerank, self._rerank = self._rerank, 1
        try:
            cand, _ = self.search(vectors, count * rerank)
        finally:
            self._rerank = rerank
        found = cand >= 0
        stored = np.zeros((*cand.shape, self.ndim), dtype=np.float32)
        stored[found] = self.get(cand[found])
        q = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        norms = np.maximum(np.linalg.norm(stored, axis=2), 1e-12)
        d = np.where(found, 1.0 - np.einsum("nkd,nd->nk", stored, q) / norms, np.inf).astype(np.float32)
        order = np.argsort(d, axis=1, kind="stable")[:, :count]
        return np.take_along_axis(cand, order, 1), np.take_along_axis(d, order, 1)

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
