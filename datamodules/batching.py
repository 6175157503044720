"""Training batches of similar length, so padding to the longest example wastes little compute.

Both SFT datamodules pad each batch to its longest example. With ``group_by_length`` their train
loaders draw batches through transformers' :class:`~transformers.trainer_pt_utils.LengthGroupedSampler`
(the sampler behind ``TrainingArguments.group_by_length``): indices are shuffled, cut into mega-batches
of 50 batches, and each mega-batch is sorted by length, so a batch holds examples of similar length
while the order of batches stays random. Lengths are character counts of the example's text (a proxy
for token counts that needs no tokenizer pass).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader

__all__ = ["train_loader"]


def train_loader(
    data: Sequence[Any],
    batch_size: int,
    lengths: Sequence[int],
    collate_fn: Callable,
    group_by_length: bool,
    seed: int = 0,
    num_workers: int = 0,
) -> DataLoader:
    """A shuffled train loader over ``data``; with ``group_by_length`` batches group similar ``lengths``."""
    if not group_by_length:
        return DataLoader(
            data, batch_size=batch_size, shuffle=True, num_workers=num_workers, collate_fn=collate_fn
        )
    from transformers.trainer_pt_utils import LengthGroupedSampler

    gen = torch.Generator().manual_seed(seed)
    sampler = LengthGroupedSampler(batch_size, lengths=list(lengths), generator=gen)
    return DataLoader(
        data, batch_size=batch_size, sampler=sampler, num_workers=num_workers, collate_fn=collate_fn
    )
