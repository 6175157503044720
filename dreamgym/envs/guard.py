"""The real-step guard of the offline-only regime (the paper's WebArena-Lite setting).

While a guard is active (:func:`forbid_real_steps`), every reset or step of a *real* env
(:attr:`dreamgym.envs.base.TextEnvBase.is_real`) raises :class:`RealStepForbidden`, except inside
:func:`held_out_evaluation` and only for an env on a held-out split ("val" or "test"). The synthetic
env is never affected. :class:`dreamgym.rl.offline.OfflineOnly` turns the guard on for a whole ``fit``
and opens the evaluation window for its validation loops.

The state is process-wide (one training run per process), not per thread: envs that step their slots
in worker threads are checked once per batch, in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "RealStepForbidden", "forbid_real_steps", "held_out_evaluation", "enter_evaluation", "exit_evaluation",
    "check_real_step", "guard_active",
]  # fmt: skip

HELD_OUT_SPLITS = ("val", "test")
_STATE: dict[str, Any] = {"reason": None, "evaluating": 0}


class RealStepForbidden(RuntimeError):
    """A real env was reset or stepped where the offline-only regime forbids it."""


def guard_active() -> bool:
    """Whether real steps are forbidden now (outside an evaluation window)."""
    return _STATE["reason"] is not None


@contextmanager
def forbid_real_steps(reason: str) -> Iterator[None]:
    """Forbid real env steps in this block (``reason`` says who asked, for the error message)."""
    if _STATE["reason"] is not None:
        raise RuntimeError(f"the real-step guard is already active ({_STATE['reason']}); do not nest it")
    _STATE["reason"] = reason
    try:
        yield
    finally:
        _STATE["reason"], _STATE["evaluating"] = None, 0


@contextmanager
def held_out_evaluation() -> Iterator[None]:
    """Allow real steps on held-out splits in this block (the held-out evaluation of a guarded fit)."""
    enter_evaluation()
    try:
        yield
    finally:
        exit_evaluation()


def enter_evaluation() -> None:
    """Open an evaluation window (for callbacks whose start and end are separate hooks)."""
    _STATE["evaluating"] += 1


def exit_evaluation() -> None:
    """Close the window :func:`enter_evaluation` opened."""
    _STATE["evaluating"] = max(0, _STATE["evaluating"] - 1)


def check_real_step(env: Any, what: str = "step") -> None:
    """Raise :class:`RealStepForbidden` if ``env`` (a real env) may not ``what`` now (module docstring)."""
    reason = _STATE["reason"]
    if reason is None:
        return
    split = getattr(env, "split", None)
    if _STATE["evaluating"] and split in HELD_OUT_SPLITS:
        return
    where = "outside held-out evaluation" if not _STATE["evaluating"] else f"on split {split!r}"
    raise RealStepForbidden(
        f"{type(env).__name__} (split {split!r}) was asked to {what} {where}, but this run is offline-only "
        f"({reason}): the experience model and the warm start learn from offline files, RL runs in the "
        "synthetic env, and the real env serves only the held-out evaluation (val/test split). Remove what "
        "touches the real env (a real or sim2real schedule, `model.init_args.audit`, an on-policy collection), "
        "or drop the offline-only guard (dreamgym.rl.offline.OfflineOnly) for an online run."
    )
