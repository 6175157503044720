"""The records every part of dreamgym exchanges, defined once.

A :class:`Transition` is one step ``(s_t, a_t) -> (s_{t+1}, r_{t+1})`` of one episode; a
:class:`Trajectory` is one episode. Offline data, the replay buffer, the experience model's SFT
examples, the policy's warm start and RL write-back all use these two classes and the JSONL
reader/writer below; nothing else defines a transition.

File format: one trajectory per line (JSON object), transitions nested under ``"transitions"``.
Writing is append-only and flushed per line, so an interrupted collection loses at most the
trajectory being written. Reading validates every field and raises :class:`TrajectoryFileError`
naming the file, the line, the field, the bad value and the fix; nothing is skipped silently.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ACTION_TEMPLATE",
    "is_success",
    "SOURCES",
    "SPLITS",
    "Transition",
    "Trajectory",
    "TrajectoryFileError",
    "TrajectoryWriter",
    "TrajectoryWriteError",
    "read_trajectories",
    "write_trajectories",
    "save_trajectories",
    "check_whole_lines",
    "iter_transitions",
]

SOURCES = ("real", "synthetic", "offline")
"""Where a transition came from: a live real env, the experience model, or an offline file."""
SPLITS = ("train", "val", "test")
"""Task splits. Splits are by task (instruction), never by transition."""
ACTION_TEMPLATE = re.compile(r"^(\w+(?:\[[^\[\]<>]*\])*)\[<[^>]*>\]$")
"""An ``available_actions`` entry with a free last argument, e.g. ``search[<query>]`` or
``type[4][<text>]`` (group 1: what comes before it, ``search`` or ``type[4]``)."""


class TrajectoryFileError(ValueError):
    """A trajectory file (or record) does not follow the schema."""


@dataclass
class Transition:
    """One step of one episode.

    Attributes:
        task_id: id of the task (goal) this episode pursues; the unit of train/val/test splits.
        instruction: the task instruction shown to the agent.
        step: 0-based index of this step within its episode.
        state: abstract textual state s_t before the action.
        action: action text a_t as sent to the env.
        next_state: abstract textual state s_{t+1} after the action.
        reward: outcome reward r_{t+1} (1.0 only on the final step of a successful episode).
        done: whether the episode ended at this step (terminated or truncated).
        success: whether the episode ended in success at this step.
        source: one of ``SOURCES``.
        env: env name as in the registry ("webshop", "alfworld", ...).
        split: one of ``SPLITS``.
        available_actions: actions available in ``state`` (may be empty if unknown).
        reasoning: rationale R_t for the transition (teacher-written or generated), if any.
        score: the env's raw score at this step (WebShop's [0, 1] purchase score), if any.
        invalid: the action was not valid in ``state`` (a no-op in the real env).
        terminated: the episode ended by the env's own rule (purchase, win).
        truncated: the episode was cut by the step limit.
        trajectory_id: id of the episode this step belongs to.
        expert_action: what an expert would do in ``state`` (a DAgger label: a scripted agent asked in the
            policy's own episode); behaviour cloning learns it instead of ``action``. Left out of the
            record when None.
    """

    task_id: str
    instruction: str
    step: int
    state: str
    action: str
    next_state: str
    reward: float
    done: bool
    success: bool = False
    source: str = "offline"
    env: str = "webshop"
    split: str = "train"
    available_actions: list[str] = field(default_factory=list)
    reasoning: str | None = None
    score: float = 0.0
    invalid: bool = False
    terminated: bool = False
    truncated: bool = False
    trajectory_id: str = ""
    expert_action: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["expert_action"] is None:  # unlabelled steps keep the records they always had
            del d["expert_action"]
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "transition") -> Transition:
        """Build and validate a transition; errors name ``where`` and the field."""
        return cls(**_validate(d, _TRANSITION_FIELDS, where))


@dataclass
class Trajectory:
    """One episode: its task, who produced it and its transitions in order.

    Attributes:
        trajectory_id: unique id of the episode.
        task_id: id of the task; all transitions share it.
        instruction: the task instruction.
        env: env name.
        split: one of ``SPLITS``.
        source: one of ``SOURCES``.
        policy: who acted ("expert", "random", "policy", ...).
        transitions: the steps, ``transitions[i].step == i``.
        success: the episode succeeded.
        score: the final raw score (WebShop purchase score, 1/0 elsewhere).
    """

    trajectory_id: str
    task_id: str
    instruction: str
    env: str
    split: str
    source: str
    policy: str
    transitions: list[Transition]
    success: bool = False
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "transitions": [t.to_dict() for t in self.transitions]}

    @classmethod
    def from_dict(cls, d: Any, where: str = "trajectory") -> Trajectory:
        """Build and validate a trajectory and its transitions; errors name ``where`` and the field."""
        values = _validate(d, _TRAJECTORY_FIELDS, where)
        raw = values["transitions"]
        values["transitions"] = [
            Transition.from_dict(t, f"{where}, transitions[{i}]") for i, t in enumerate(raw)
        ]
        for i, t in enumerate(values["transitions"]):
            if t.step != i:
                raise TrajectoryFileError(
                    f"{where}, transitions[{i}]: field 'step' is {t.step}, expected {i} "
                    "(transitions must be stored in order, one per step)"
                )
        return cls(**values)


# name -> (accepted types, required, default)
_STR, _INT, _NUM, _BOOL = (str,), (int,), (int, float), (bool,)
_TRANSITION_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "task_id": (_STR, True),
    "instruction": (_STR, True),
    "step": (_INT, True),
    "state": (_STR, True),
    "action": (_STR, True),
    "next_state": (_STR, True),
    "reward": (_NUM, True),
    "done": (_BOOL, True),
    "success": (_BOOL, False),
    "source": (_STR, False),
    "env": (_STR, False),
    "split": (_STR, False),
    "available_actions": ((list,), False),
    "reasoning": ((str, type(None)), False),
    "score": (_NUM, False),
    "invalid": (_BOOL, False),
    "terminated": (_BOOL, False),
    "truncated": (_BOOL, False),
    "trajectory_id": (_STR, False),
    "expert_action": ((str, type(None)), False),
}
_TRAJECTORY_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "trajectory_id": (_STR, True),
    "task_id": (_STR, True),
    "instruction": (_STR, True),
    "env": (_STR, True),
    "split": (_STR, True),
    "source": (_STR, True),
    "policy": (_STR, True),
    "transitions": ((list,), True),
    "success": (_BOOL, False),
    "score": (_NUM, False),
}


def _validate(d: Any, spec: dict[str, tuple[tuple[type, ...], bool]], where: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise TrajectoryFileError(f"{where}: expected a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(spec))
    if unknown:
        raise TrajectoryFileError(f"{where}: unknown field(s) {unknown}; allowed fields are {sorted(spec)}")
    out: dict[str, Any] = {}
    for name, (types, required) in spec.items():
        if name not in d:
            if required:
                raise TrajectoryFileError(f"{where}: missing required field '{name}'")
            continue
        v = d[name]
        bad_bool = isinstance(v, bool) and bool not in types
        if not isinstance(v, types) or bad_bool:
            want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise TrajectoryFileError(
                f"{where}: field '{name}' must be {want}, got {type(v).__name__} {v!r:.80}"
            )
        out[name] = v
    for name in ("reward", "score"):  # what the experience model's own parser accepts (formats.parse_target)
        v = out.get(name)
        if v is not None and not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise TrajectoryFileError(
                f"{where}: field '{name}' is {v!r}; rewards and scores are finite numbers in [0, 1] (every "
                "bundled env's outcome reward is 0 or 1): fix or drop this record"
            )
    if "source" in out and out["source"] not in SOURCES:
        raise TrajectoryFileError(f"{where}: field 'source' is {out['source']!r}; use one of {SOURCES}")
    if "split" in out and out["split"] not in SPLITS:
        raise TrajectoryFileError(f"{where}: field 'split' is {out['split']!r}; use one of {SPLITS}")
    if name_list := out.get("available_actions"):
        if not all(isinstance(a, str) for a in name_list):
            raise TrajectoryFileError(f"{where}: field 'available_actions' must be a list of strings")
    return out


def is_success(reward: float, done: bool = True) -> bool:
    """The success rule of every bundled env (binary outcome rewards): the episode ended with reward 1."""
    return bool(done) and float(reward) >= 1.0


def read_trajectories(path: str | os.PathLike) -> Iterator[Trajectory]:
    """Yield trajectories from a JSONL file, validating each line.

    Raises:
        FileNotFoundError: with the path, if the file does not exist.
        TrajectoryFileError: ``"<file>:<line>: ..."`` for a line that is not JSON or not the schema.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"trajectory file {str(path)!r} does not exist; create it with "
            f"`python -m dreamgym collect --env <env> --split <split> --out {path}`"
        )
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TrajectoryFileError(
                    f"{path}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start}); a trajectory file is JSON "
                    "lines in UTF-8 (a binary file, or one saved as UTF-16?)"
                ) from None
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise TrajectoryFileError(
                    f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno}); "
                    "each line must be one trajectory object"
                ) from None
            yield Trajectory.from_dict(d, where=f"{path}:{lineno}")


def iter_transitions(trajectories: Iterable[Trajectory]) -> Iterator[Transition]:
    """Flatten trajectories into their transitions, in order."""
    for traj in trajectories:
        yield from traj.transitions


class TrajectoryWriteError(OSError):
    """Writing trajectories failed (a full disk, a quota): ``path`` holds its earlier lines and the
    ``written`` whole ones this writer added before, never a cut line."""

    def __init__(self, path: Path, written: int, cause: OSError):
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path, self.written = path, written


class TrajectoryWriter:
    """Append-only JSONL writer; each :meth:`write` (one trajectory) or :meth:`write_many` (a chunk) is
    flushed whole or not at all: when the disk refuses part of it, the file is cut back to where the
    chunk began and :class:`TrajectoryWriteError` says how many this writer did write.

    Example:
        >>> with TrajectoryWriter("data.jsonl") as w:  # doctest: +SKIP
        ...     w.write(traj)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_whole_lines(self.path)  # never glue a record onto a cut line
        self._f = self.path.open("a", encoding="utf-8")
        self.count = 0

    def write(self, traj: Trajectory) -> None:
        self.write_many([traj])

    def write_many(self, trajs: list[Trajectory]) -> None:
        """Append ``trajs`` as one chunk: all their lines, or (on a write error) none of them."""
        for t in trajs:
            Trajectory.from_dict(t.to_dict(), where=f"writing to {self.path}")  # never write bad data
        text = "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in trajs)
        start = self.path.stat().st_size  # every earlier chunk was flushed
        try:
            self._f.write(text)
            self._f.flush()
        except OSError as exc:
            try:  # the buffered rest may be written (or refused again) on close; cut back after it
                self._f.close()
            except OSError:
                pass
            os.truncate(self.path, start)
            self._f = self.path.open("a", encoding="utf-8")
            raise TrajectoryWriteError(self.path, self.count, exc) from exc
        self.count += len(trajs)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_trajectories(path: str | os.PathLike, trajectories: Iterable[Trajectory]) -> int:
    """Append trajectories to ``path``; returns how many were written."""
    with TrajectoryWriter(path) as w:
        for t in trajectories:
            w.write(t)
        return w.count


def check_whole_lines(path: str | os.PathLike) -> None:
    """Refuse to add to a JSONL file whose last line is cut (a write was interrupted: no newline at its end).

    Raises:
        ValueError: naming the file and the fix.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            raise ValueError(
                f"{path}: its last line is cut (no newline at its end: a write was interrupted); delete that "
                "line or restore the file before adding to it"
            )


def save_trajectories(
    path: str | os.PathLike, trajectories: Iterable[Trajectory], append: bool = False
) -> int:
    """Write trajectories to ``path`` so that no interruption loses or cuts data: into a temporary file in
    the same folder (with ``append``, after a copy of the lines already there), flushed to disk, then
    renamed over ``path``. Until the rename the old file is untouched; returns how many were written.

    Raises:
        ValueError: with ``append``, when the existing file's last line is cut (:func:`check_whole_lines`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        check_whole_lines(path)
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    if append and path.exists():
        shutil.copyfile(path, tmp)
    try:
        n = write_trajectories(tmp, trajectories)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return n
