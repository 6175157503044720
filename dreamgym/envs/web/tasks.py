"""The web task suite: MiniWoB++ task types, and tasks = (type, seed) split by seed and by held-out type.

A task is one seeded episode of one MiniWoB task type (the seed fixes the page's random content, e.g.
which button to click). Splits never share a seed: train uses seeds ``10_000 + i``, val ``20_000 + i``,
test ``30_000 + i``. The test split also holds :data:`HELD_OUT_TYPES`, types that no train or val task
has (transfer to unseen pages). Tasks are ordered seed-major (all types of the first seed, then the
next), so the first ``k * len(types)`` tasks of a split cover every type ``k`` times.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TRAIN_TYPES", "HELD_OUT_TYPES", "ALL_TYPES", "SPLIT_SEED_BASE", "WebTask", "suite_tasks"]

TRAIN_TYPES = (
    "click-button", "click-link", "click-dialog", "click-dialog-2", "click-widget", "click-tab",
    "click-tab-2", "click-collapsible-nodelay", "click-collapsible-2-nodelay", "click-button-sequence",
    "click-checkboxes", "click-option", "choose-list", "focus-text", "focus-text-2", "enter-text",
    "enter-text-2", "enter-password", "login-user", "guess-number", "simple-arithmetic",
    "simple-algebra", "odd-or-even", "find-word", "read-table", "copy-paste",
)  # fmt: skip
"""Task types of every split."""
HELD_OUT_TYPES = ("click-test", "click-test-2", "unicode-test", "enter-text-dynamic")
"""Task types only in the test split (never trained on)."""
ALL_TYPES = TRAIN_TYPES + HELD_OUT_TYPES
SPLIT_SEED_BASE = {"train": 10_000, "val": 20_000, "test": 30_000}
"""The first seed of each split."""


@dataclass(frozen=True)
class WebTask:
    """One seeded episode of a MiniWoB task type."""

    task_type: str
    seed: int
    split: str

    @property
    def task_id(self) -> str:
        return f"web/{self.split}/{self.task_type}/{self.seed}"


def suite_tasks(
    split: str, seeds: int, task_types: tuple[str, ...] | None = None, held_out: bool = True
) -> list[WebTask]:
    """The tasks of ``split``: ``seeds`` seeds per type, seed-major.

    Args:
        split: "train", "val" or "test".
        seeds: seeds per task type.
        task_types: the types (default :data:`TRAIN_TYPES`, plus :data:`HELD_OUT_TYPES` in test).
        held_out: add :data:`HELD_OUT_TYPES` to the default test types.

    Raises:
        ValueError: on an unknown split, fewer than one seed or an unknown task type.
    """
    if split not in SPLIT_SEED_BASE:
        raise ValueError(f"split={split!r} is not a web split; use one of {sorted(SPLIT_SEED_BASE)}")
    if seeds < 1:
        raise ValueError(f"seeds per task type for split {split!r} is {seeds}; give at least 1")
    if task_types is None:
        task_types = TRAIN_TYPES + (HELD_OUT_TYPES if split == "test" and held_out else ())
    unknown = [t for t in task_types if t not in ALL_TYPES]
    if unknown:
        raise ValueError(f"task_types {unknown} are not in the web suite; choose from {list(ALL_TYPES)}")
    base = SPLIT_SEED_BASE[split]
    return [WebTask(t, base + i, split) for i in range(seeds) for t in task_types]
