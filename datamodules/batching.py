"""Training batches of similar length, in an order a resumed fit can continue.

Both SFT datamodules pad each batch to its longest example. With ``group_by_length`` their train
loaders draw batches through transformers' :class:`~transformers.trainer_pt_utils.LengthGroupedSampler`
(the sampler behind ``TrainingArguments.group_by_length``): indices are shuffled, cut into mega-batches
of 50 batches, and each mega-batch is sorted by length, so a batch holds examples of similar length
while the order of batches stays random. Lengths are character counts of the example's text (a proxy
for token counts that needs no tokenizer pass).

Each epoch's order is a function of ``(seed, epoch)`` alone (:class:`EpochSampler`), so a fit resumed
from a mid-epoch checkpoint (``--ckpt_path last``) makes the interrupted epoch's order again and skips
the batches already trained on: it sees the batches an uninterrupted fit sees, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

__all__ = ["EpochSampler", "train_loader"]


class EpochSampler(Sampler[int]):
    """Indices of ``n`` examples, epoch by epoch: a permutation drawn from ``seed + epoch`` (with
    ``lengths``: LengthGroupedSampler's length-grouped order from that seed).

    Args:
        n: number of examples.
        batch_size: the loader's batch size (length grouping and :meth:`resume` count in batches).
        lengths: per-example lengths for length grouping (None: a plain permutation).
        seed: the order's seed.
    """

    def __init__(self, n: int, batch_size: int, lengths: Sequence[int] | None = None, seed: int = 0):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.lengths = None if lengths is None else list(lengths)
        self.epoch, self._skip = 0, 0

    def order(self, epoch: int) -> list[int]:
        """The indices of ``epoch``, the same every time."""
        gen = torch.Generator().manual_seed(self.seed + epoch)
        if self.lengths is None:
            return torch.randperm(self.n, generator=gen).tolist()
        from transformers.trainer_pt_utils import LengthGroupedSampler

        return list(LengthGroupedSampler(self.batch_size, lengths=self.lengths, generator=gen))

    def resume(self, epoch: int, batches_done: int) -> None:
        """Continue at ``epoch`` after its first ``batches_done`` batches (the next iteration only)."""
        self.epoch, self._skip = epoch, batches_done * self.batch_size

    def __iter__(self) -> Iterator[int]:
        order, self._skip = self.order(self.epoch)[self._skip :], 0
        self.epoch += 1
        return iter(order)

    def __len__(self) -> int:
        return self.n


class _ResumableLoader(DataLoader):
    """A DataLoader whose sampler continues a resumed epoch (:meth:`EpochSampler.resume`, called by the
    data module from the restored trainer's step). ``state_dict``/``load_state_dict`` tell Lightning the
    loader resumes (its position is re-derived from the trainer's counters, so there is nothing to store)."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def train_loader(
    data: Sequence[Any],
    batch_size: int,
    lengths: Sequence[int],
    collate_fn: Callable,
    group_by_length: bool,
    seed: int = 0,
    num_workers: int = 0,
    trainer: Any = None,
) -> DataLoader:
    """A shuffled train loader over ``data``; with ``group_by_length`` batches group similar ``lengths``.

    With the ``trainer`` of a resumed fit (its step and epoch restored from the checkpoint), the loader
    starts where the interrupted fit stopped: at ``trainer.current_epoch``, after the batches of that
    epoch the restored ``trainer.global_step`` already counts (one optimizer step per batch; with
    gradient accumulation it starts the epoch again, as Lightning does for any loader).
    """
    sampler = EpochSampler(len(data), batch_size, lengths if group_by_length else None, seed)
    if (
        trainer is not None
        and trainer.global_step > 0
        and getattr(trainer, "accumulate_grad_batches", 1) == 1
    ):
        per_epoch = -(-len(data) // batch_size)
        sampler.resume(trainer.current_epoch, trainer.global_step - trainer.current_epoch * per_epoch)
    return _ResumableLoader(
        data, batch_size=batch_size, sampler=sampler, num_workers=num_workers, collate_fn=collate_fn
    )
