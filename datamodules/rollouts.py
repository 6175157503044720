"""Data for RL: the training "dataset" is an endless stream of iteration ticks (each training step of
:class:`models.policy_rl.PolicyRL` collects its own rollouts from the schedule's env with the current
policy); validation and test batches are chunks of a FIXED list of held-out task indices (test split),
which the module plays greedily in the real env.
"""

from __future__ import annotations

from collections.abc import Iterator

import lightning as L
from torch.utils.data import DataLoader, IterableDataset

__all__ = ["RolloutDataModule", "IterationTicks"]


class IterationTicks(IterableDataset):
    """Yields 0, 1, 2, ... forever: one item per RL iteration (the schedule decides when fit ends)."""

    def __iter__(self) -> Iterator[int]:
        i = 0
        while True:
            yield i
            i += 1


class RolloutDataModule(L.LightningDataModule):
    """Iteration ticks for training; fixed held-out task chunks for validation and test.

    Args:
        eval_tasks: the held-out tasks: an int ``n`` means test-split tasks ``0..n-1``; or an explicit list.
        eval_batch_tasks: tasks per validation/test batch (episodes played in parallel by the env slots).
        test_tasks: tasks for ``test`` (default: ``eval_tasks``).
    """

    def __init__(
        self,
        eval_tasks: int | list[int] = 32,
        eval_batch_tasks: int = 8,
        test_tasks: int | list[int] | None = None,
    ):
        super().__init__()
        if eval_batch_tasks < 1:
            raise ValueError(f"RolloutDataModule.eval_batch_tasks must be >= 1, got {eval_batch_tasks}")
        self.eval_tasks = _as_tasks(eval_tasks, "eval_tasks")
        self.test_tasks = self.eval_tasks if test_tasks is None else _as_tasks(test_tasks, "test_tasks")
        self.eval_batch_tasks = eval_batch_tasks

    def train_dataloader(self) -> DataLoader:
        return DataLoader(IterationTicks(), batch_size=None, num_workers=0)

    def _chunks(self, tasks: list[int]) -> DataLoader:
        chunks = [tasks[i : i + self.eval_batch_tasks] for i in range(0, len(tasks), self.eval_batch_tasks)]
        return DataLoader(chunks, batch_size=None, shuffle=False, num_workers=0, collate_fn=lambda x: x)

    def val_dataloader(self) -> DataLoader:
        return self._chunks(self.eval_tasks)

    def test_dataloader(self) -> DataLoader:
        return self._chunks(self.test_tasks)


def _as_tasks(value: int | list[int], name: str) -> list[int]:
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"RolloutDataModule.{name} must be >= 1 or a list of task indices, got {value}")
        return list(range(value))
    tasks = [int(t) for t in value]
    if not tasks:
        raise ValueError(f"RolloutDataModule.{name} is an empty list; give task indices of the test split")
    return tasks
