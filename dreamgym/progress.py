"""A progress line with a total and an ETA, for runs whose output goes to a log file.

Lightning's bars count batches of one epoch (``Epoch 0/-2``, ``3/--`` when fit is step-bounded or
ended by an RL schedule). :class:`StepProgress` prints, at most every ``every_s`` seconds and at the
end, ``[name] step 120/1800 (6.7 %), 1.21 s/step, ETA 33.9 min, train/loss 2.31`` from the trainer's
global step, the total (``trainer.max_steps``, or the module's ``planned_steps()`` such as an RL
schedule's iterations) and, under ``max_time``, the time left, whichever ends first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar

__all__ = ["StepProgress", "CountProgress", "PlannedProgressBar", "eta_line", "play_in_chunks"]

T = TypeVar("T")


def eta_line(
    name: str,
    step: int,
    total: int | None,
    s_per_step: float | None,
    time_left_s: float | None,
    metrics: dict,
    unit: str = "step",
) -> str:
    """The progress line (module docstring): ``step`` of ``total`` at ``s_per_step`` (``unit``: what is
    counted)."""
    parts = [f"[{name}] {unit} {step}" + (f"/{total} ({100 * step / total:.1f} %)" if total else "")]
    if s_per_step is not None:
        parts.append(f"{s_per_step:.2f} s/{unit}")
        eta = s_per_step * max(total - step, 0) if total else None
        if time_left_s is not None:
            eta = time_left_s if eta is None else min(eta, time_left_s)
        if eta is not None:
            parts.append(f"ETA {eta / 60:.1f} min")
    parts += [f"{k} {v:.4g}" for k, v in metrics.items()]
    return ", ".join(parts)


class StepProgress(L.Callback):
    """Print a progress line with total and ETA every ``every_s`` seconds (see module docstring).

    Args:
        every_s: seconds between lines (no stage should be silent for longer).
        metrics: logged scalars to show when present (e.g. ``train/loss``).
    """

    def __init__(self, every_s: float = 30.0, metrics: tuple[str, ...] = ("train/loss",)):
        self.every_s, self.metrics = every_s, metrics
        self._t0 = self._last = 0.0
        self._step0 = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self._t0 = self._last = time.perf_counter()
        own = getattr(pl_module, "progress_step", None)
        self._step0 = own() if callable(own) else trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if time.perf_counter() - self._last >= self.every_s:
            self._print(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        self._print(trainer, pl_module)

    def _print(self, trainer, pl_module) -> None:
        self._last = time.perf_counter()
        total = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
        planned = getattr(pl_module, "planned_steps", None)
        own = getattr(pl_module, "progress_step", None)  # a module counting in its own units (RL iterations)
        if callable(planned) and (callable(own) or total is None):
            total = planned()
        timer = next((c for c in trainer.callbacks if isinstance(c, L.pytorch.callbacks.Timer)), None)
        left = timer.time_remaining("train") if timer is not None else None
        shown = {k: float(trainer.callback_metrics[k]) for k in self.metrics if k in trainer.callback_metrics}
        step = own() if callable(own) else trainer.global_step
        done = step - self._step0
        rate = (self._last - self._t0) / done if done else None
        line = eta_line(type(pl_module).__name__, step, total, rate, left, shown)
        if trainer.is_global_zero:
            print(line, flush=True)


class CountProgress:
    """Call with a count done so far; prints :func:`eta_line` at most every ``every_s`` seconds and once
    when ``total`` is reached (e.g. episodes of an evaluation outside ``fit``)."""

    def __init__(self, name: str, total: int, unit: str = "episode", every_s: float = 30.0):
        self.name, self.total, self.unit, self.every_s = name, total, unit, every_s
        self.start = self.last = time.perf_counter()
        self.printed_end = False

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        end = done >= self.total
        if (end and not self.printed_end) or (not end and now - self.last >= self.every_s):
            rate = (now - self.start) / done if done else None
            print(eta_line(self.name, done, self.total, rate, None, {}, unit=self.unit), flush=True)
            self.last, self.printed_end = now, end


class PlannedProgressBar(RichProgressBar):
    """Lightning's rich bar with the run's real total: the module's ``planned_steps()`` where it has one
    (an RL schedule's iterations: ``9/30``, not ``9/--``), and no ``Epoch 0/-2`` when fit is not
    epoch-bounded (``max_epochs: -1``)."""

    @property
    def total_train_batches(self) -> int | float:
        planned = getattr(self.trainer.lightning_module, "planned_steps", None)
        total = planned() if callable(planned) else None
        return total if total else super().total_train_batches

    def _get_train_description(self, current_epoch: int) -> str:
        if self.trainer.max_epochs is None or self.trainer.max_epochs < 0:
            return f"Epoch {current_epoch}"
        return super()._get_train_description(current_epoch)


def play_in_chunks(
    tasks: Sequence[int],
    play: Callable[[list[int]], list[T]],
    chunk: int | None = None,
    max_minutes: float | None = None,
    label: str = "",
    clock: Callable[[], float] | None = None,
    unit: str = "tasks played",
) -> list[T]:
    """``play(tasks[i : i + chunk])`` for consecutive chunks, concatenated (one chunk of all tasks when
    ``chunk`` is None). With ``max_minutes``, no chunk starts once that many minutes (of ``clock``, default
    ``time.monotonic``) have passed since the first began; the result then covers the first tasks only,
    and a line says how many (``unit`` names them). The first chunk always plays."""
    clock = clock or time.monotonic
    start, size, played = clock(), max(1, chunk or len(tasks)), []
    for first in range(0, len(tasks), size):
        if played and max_minutes is not None and (clock() - start) / 60 >= max_minutes:
            print(f"[collect] {label}: {len(played)} of {len(tasks)} {unit} in the {max_minutes:.1f} min "
                  "the time budget gives; the rest are skipped", flush=True)  # fmt: skip
            break
        played += play(list(tasks[first : first + size]))
    return played
