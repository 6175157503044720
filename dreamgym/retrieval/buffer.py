"""The replay buffer: every transition the experience model may retrieve, with a usearch index.

Each transition is embedded from its (state, action): the embedding is the concatenation
``[sqrt(w) * enc(action), sqrt(1 - w) * enc(state)]`` with ``w = action_weight``, so the cosine
similarity of two transitions is ``w * cos(actions) + (1 - w) * cos(states)`` (long states cannot
drown the action). Keys are positions in the buffer (0, 1, 2, ...).

Leakage control: :meth:`ReplayBuffer.search` takes, per query, the key of the query itself and/or an
id to exclude: ``exclude="trajectory"`` (default in SFT and evaluation) drops every transition of
the query's own episode, ``"task"`` every transition of the same task, ``"self"`` only the query.

Same-task steps first (``prefer_tasks``): per query, a task id whose real transitions with exactly the
query's action lead the neighbours, before the most similar ones. In ALFWorld what a place holds is per
game and nothing earlier in an episode shows it; the buffer holds the same game's real step for most of
a synthetic episode's ``go to`` / ``open`` steps, which similarity by (state, action) almost never ranks
in the top k (``scripts/replay_synthetic_buffer.py``'s retrieval check: 15 of 400 against 328).

On disk (:meth:`save` / :meth:`load`), a directory holds ``transitions.jsonl`` (one transition per
line), ``index.usearch`` and ``buffer.json`` (encoder config, action weight, count).

Checkpoints (:meth:`state_dict`) keep the index as it was when it was built or loaded plus the sizes of
the adds since, and :meth:`load_state_dict` embeds those transitions and adds them again, batch for
batch: usearch draws each new node's graph level from a generator that a serialised index does not keep,
so an index restored from its bytes and then grown is another graph (other neighbours) than one grown
without the round trip. With the replay, an RL fit that writes synthetic steps back and resumes
retrieves what the uninterrupted fit retrieves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dreamgym.retrieval.encoders import Encoder, HashingEncoder, make_encoder
from dreamgym.retrieval.index import BucketIndex, VectorIndex, index_from_bytes, load_index
from dreamgym.schema import Transition, iter_transitions, read_trajectories

__all__ = ["ReplayBuffer", "EXCLUDE_MODES", "META_KEYS", "STATE_KEYS"]

EXCLUDE_MODES = ("none", "self", "trajectory", "task")

# What :meth:`ReplayBuffer.save` / :meth:`ReplayBuffer.state_dict` write; files and checkpoints of an older
# dreamgym that lack some are upgraded by ``scripts/migrate_records.py`` (the library reads only these).
META_KEYS = ("encoder", "action_weight", "dtype", "bucket_radius", "probe")
STATE_KEYS = ("meta", "transitions", "index", "index_adds")


def _check_current(
    record: dict[str, Any], keys: tuple[str, ...], what: str, path: Path | None = None
) -> None:
    missing = [k for k in keys if k not in record]
    if missing:
        where = str(path) if path is not None else "<the checkpoint or buffer folder>"
        raise ValueError(
            f"{what} lacks {', '.join(missing)}: it was written by an older dreamgym; upgrade it once with "
            f"`python scripts/migrate_records.py {where}` (it fills what the older version meant)"
        )


class ReplayBuffer:
    """Transitions + a cosine index over their embedded (state, action).

    Args:
        encoder: text encoder (default: :class:`HashingEncoder`).
        action_weight: share of the action in the similarity (0..1; see module docstring).
        dtype: usearch storage type.
        bucket_radius: 0 indexes every vector in one usearch graph (:class:`VectorIndex`); > 0 groups
            near-duplicates into buckets (:class:`BucketIndex`, this cosine radius), which keeps recall at
            a million transitions (BENCHMARKS.md, "Retrieval").
        probe: buckets scored per query (``bucket_radius > 0``).
    """

    def __init__(
        self,
        encoder: Encoder | None = None,
        action_weight: float = 0.5,
        dtype: str = "f32",
        bucket_radius: float = 0.0,
        probe: int = 8,
    ):
        if not 0.0 <= action_weight <= 1.0:
            raise ValueError(f"ReplayBuffer.action_weight must be in [0, 1], got {action_weight}")
        self.encoder = encoder or HashingEncoder()
        self.action_weight = float(action_weight)
        self.dtype = dtype
        self.transitions: list[Transition] = []
        self._steps: dict[tuple[str, str], list[int]] | None = None  # (task_id, action) -> real keys, lazily
        self._episodes: dict[str, dict[int, str]] = {}  # trajectory_id -> {step: action}, real, with _steps
        self.bucket_radius, self.probe = float(bucket_radius), int(probe)
        self.index = self._new_index()
        # what the index grew from (module docstring, "Checkpoints"): its bytes before the adds (b"": a new
        # index; None: `self.index` itself, copied at the next add), and the sizes of the adds since
        self._base: bytes | None = b""
        self._adds: list[int] = []

    def _new_index(self) -> VectorIndex | BucketIndex:
        ndim = 2 * self.encoder.dim
        if self.bucket_radius:
            return BucketIndex(ndim, self.bucket_radius, self.probe, self.dtype)
        return VectorIndex(ndim, self.dtype)

    # ---------------------------------------------------------------- building
    @classmethod
    def from_files(
        cls, paths: Sequence[str | os.PathLike], encoder: Encoder | None = None, **kwargs
    ) -> ReplayBuffer:
        """A buffer seeded with every transition of the JSONL trajectory files ``paths``."""
        buf = cls(encoder, **kwargs)
        for p in paths:
            buf.add(iter_transitions(read_trajectories(p)))
        return buf

    def __len__(self) -> int:
        return len(self.transitions)

    def embed(self, states: Sequence[str], actions: Sequence[str]) -> np.ndarray:
        """Embeddings ``(N, 2 * encoder.dim)`` of (state, action) pairs (unit norm)."""
        a = self.encoder.encode(list(actions)) * np.float32(np.sqrt(self.action_weight))
        s = self.encoder.encode(list(states)) * np.float32(np.sqrt(1.0 - self.action_weight))
        v = np.concatenate([a, s], axis=1)
        return (v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def add(self, transitions: Iterable[Transition]) -> np.ndarray:
        """Append transitions (e.g. synthetic ones written back during RL); returns their keys."""
        new = list(transitions)
        start = len(self.transitions)
        keys = np.arange(start, start + len(new), dtype=np.int64)
        if not new:
            return keys
        if self._base is None:  # a loaded index: keep it as the base the adds grow from
            self._base = self.index.to_bytes()
        self.index.add(keys, self.embed([t.state for t in new], [t.action for t in new]))
        self._adds.append(len(new))
        self.transitions.extend(new)
        if self._steps is not None:
            self._index_steps(start)
        return keys

    def _rebase(self) -> None:
        """The index as it is now (just loaded) is the base later adds grow from."""
        self._base, self._adds = None, []

    def _index_steps(self, start: int = 0) -> None:
        """Index the real steps from ``start`` on by (task, action) and by episode (never a synthetic one)."""
        steps = self._steps if self._steps is not None else {}
        if start == 0:
            self._episodes = {}
        for key in range(start, len(self.transitions)):
            t = self.transitions[key]
            if t.source != "synthetic":  # the real game's steps only, never what a model wrote back
                steps.setdefault((t.task_id, t.action), []).append(key)
                self._episodes.setdefault(t.trajectory_id, {})[t.step] = t.action
        self._steps = steps

    def earlier_actions(self, t: Transition) -> list[str]:
        """The actions real transition ``t``'s episode (``trajectory_id``) took before it, oldest first (those
        the buffer holds)."""
        if self._steps is None:
            self._index_steps()
        steps = self._episodes.get(t.trajectory_id, {})
        return [steps[i] for i in sorted(steps) if i < t.step]

    def same_steps(self, task_id: str, action: str) -> list[Transition]:
        """The real transitions of task ``task_id`` that took ``action`` (oldest first)."""
        if self._steps is None:
            self._index_steps()
        return [self.transitions[k] for k in self._steps.get((task_id, action), [])]  # type: ignore[union-attr]

    # ---------------------------------------------------------------- search
    def search(
        self,
        states: Sequence[str],
        actions: Sequence[str],
        k: int,
        exclude: str = "trajectory",
        query_keys: Sequence[int | None] | None = None,
        query_ids: Sequence[str | None] | None = None,
        prefer_tasks: Sequence[str | None] | None = None,
    ) -> list[list[Transition]]:
        """The ``k`` most similar transitions for each (state, action) query, most similar first.

        Args:
            states, actions: the queries (same length).
            k: neighbours per query.
            exclude: one of ``EXCLUDE_MODES``; what each query may not retrieve (see module docstring).
            query_keys: buffer key of each query if it is itself in the buffer (always excluded).
            query_ids: per query, the trajectory id (``exclude="trajectory"``) or task id (``"task"``).
            prefer_tasks: per query, a task id (or None) whose real transitions with the query's action come
                first, within the same exclusions (module docstring).
        """
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"ReplayBuffer.search: exclude={exclude!r}; use one of {EXCLUDE_MODES}")
        if len(states) != len(actions):
            raise ValueError(f"ReplayBuffer.search: {len(states)} states but {len(actions)} actions")
        n = len(states)
        if k <= 0 or n == 0 or len(self) == 0:
            return [[] for _ in range(n)]
        vecs = self.embed(states, actions)
        hits = self.search_vectors(vecs, k, exclude, query_keys, query_ids)
        if prefer_tasks is None:
            return hits
        keys = list(query_keys) if query_keys is not None else [None] * n
        ids = list(query_ids) if query_ids is not None else [None] * n
        out = []
        for i, (row, task) in enumerate(zip(hits, prefer_tasks, strict=True)):
            first = [] if task is None else [
                t for t in self.same_steps(task, actions[i])
                if not (keys[i] is not None and t is self.transitions[keys[i]])
                and not (ids[i] and exclude == "trajectory" and t.trajectory_id == ids[i])
                and not (ids[i] and exclude == "task" and t.task_id == ids[i])
            ]  # fmt: skip
            out.append((first + [t for t in row if not any(t is f for f in first)])[:k])
        return out

    def search_vectors(
        self,
        vecs: np.ndarray,
        k: int,
        exclude: str = "trajectory",
        query_keys: Sequence[int | None] | None = None,
        query_ids: Sequence[str | None] | None = None,
    ) -> list[list[Transition]]:
        """:meth:`search` for precomputed query embeddings."""
        n = len(vecs)
        query_keys = list(query_keys) if query_keys is not None else [None] * n
        query_ids = list(query_ids) if query_ids is not None else [None] * n
        out: list[list[Transition] | None] = [None] * n
        todo = list(range(n))
        count = min(len(self), k + (16 if exclude in ("trajectory", "task") else 1))
        while todo:
            keys, _ = self.index.search(vecs[todo], count)
            again = []
            for row, i in enumerate(todo):
                hits = [self.transitions[int(key)] for key in keys[row] if key >= 0 and key != query_keys[i]]
                if exclude in ("trajectory", "task") and query_ids[i]:
                    field = "trajectory_id" if exclude == "trajectory" else "task_id"
                    hits = [t for t in hits if getattr(t, field) != query_ids[i]]
                if len(hits) >= k or count >= len(self):
                    out[i] = hits[:k]
                else:
                    again.append(i)
            todo, count = again, min(len(self), count * 4)
        return out  # type: ignore[return-value]

    # ---------------------------------------------------------------- persistence
    def _meta(self) -> dict[str, Any]:  # every key is in META_KEYS
        return {
            "encoder": self.encoder.config(),
            "action_weight": self.action_weight,
            "dtype": self.dtype,
            "bucket_radius": self.bucket_radius,
            "probe": self.probe,
            "count": len(self),
        }

    def save(self, directory: str | os.PathLike) -> Path:
        """Write transitions, index and metadata side by side into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with (d / "transitions.jsonl").open("w", encoding="utf-8") as f:
            for t in self.transitions:
                f.write(json.dumps(t.to_dict(), ensure_ascii=False) + "\n")
        self.index.save(d / "index.usearch")
        (d / "buffer.json").write_text(json.dumps(self._meta(), indent=2))
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, encoder: Encoder | None = None) -> ReplayBuffer:
        """Read a buffer written by :meth:`save` (the encoder is rebuilt from its saved config)."""
        d = Path(directory)
        if not (d / "buffer.json").is_file():
            raise FileNotFoundError(
                f"replay buffer directory {str(d)!r} has no buffer.json; write one with ReplayBuffer.save "
                "(the experience-model SFT saves it next to the model as `buffer/`)"
            )
        meta = json.loads((d / "buffer.json").read_text())
        _check_current(meta, META_KEYS, f"replay buffer {str(d)!r} (buffer.json)", d)
        buf = cls(
            encoder or make_encoder(**meta["encoder"]),
            meta["action_weight"],
            meta["dtype"],
            meta["bucket_radius"],
            meta["probe"],
        )
        with (d / "transitions.jsonl").open(encoding="utf-8") as f:
            buf.transitions = [
                Transition.from_dict(json.loads(line), f"{d / 'transitions.jsonl'}:{i}")
                for i, line in enumerate(f, 1)
                if line.strip()
            ]
        buf.index = load_index(d / "index.usearch", 2 * buf.encoder.dim, buf.dtype)
        buf._rebase()
        if len(buf.index) != len(buf.transitions):
            raise ValueError(
                f"replay buffer {str(d)!r}: index holds {len(buf.index)} vectors but transitions.jsonl "
                f"holds {len(buf.transitions)}; re-save the buffer"
            )
        return buf

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to restore the buffer (for checkpoints): the transitions, the index it grew
        from and the sizes of the adds since (module docstring, "Checkpoints")."""
        base = self._base if self._base is not None else self.index.to_bytes()
        return {
            "meta": self._meta(),
            "transitions": [t.to_dict() for t in self.transitions],
            "index": base or None,  # None: a new index (torch's weights-only loader refuses an empty bytes)
            "index_adds": list(self._adds),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` (the encoder config must match this buffer's).

        Raises:
            ValueError: when the state lacks a field this version writes (a checkpoint from an older
                dreamgym: ``scripts/migrate_records.py`` upgrades it), or its encoder differs.
        """
        _check_current(state["meta"], META_KEYS, "ReplayBuffer.load_state_dict: the checkpoint's buffer")
        _check_current(state, STATE_KEYS, "ReplayBuffer.load_state_dict: the checkpoint's buffer")
        if state["meta"]["encoder"] != self.encoder.config():
            raise ValueError(
                f"ReplayBuffer.load_state_dict: saved encoder {state['meta']['encoder']} differs from "
                f"this buffer's {self.encoder.config()}; build the buffer with the saved encoder"
            )
        self.action_weight = float(state["meta"]["action_weight"])
        self.bucket_radius = float(state["meta"]["bucket_radius"])
        self.probe = int(state["meta"]["probe"])
        transitions = [Transition.from_dict(t) for t in state["transitions"]]
        self._steps = None
        self.index = (
            index_from_bytes(state["index"], 2 * self.encoder.dim, self.dtype)
            if state["index"]
            else self._new_index()
        )
        self._rebase()
        self.transitions = transitions[: len(self.index)]
        for size in state["index_adds"]:  # the adds again, batch for batch (same embeddings)
            self.add(transitions[len(self.transitions) : len(self.transitions) + size])
        if len(self.index) != len(transitions):
            raise ValueError(
                f"ReplayBuffer.load_state_dict: the index holds {len(self.index)} vectors but the state has "
                f"{len(transitions)} transitions; the checkpoint is damaged, resume from an earlier one"
            )
