"""Forward passes that compute the LM head only where a loss is taken.

SFT examples here are prompt-heavy (a long state and retrieved neighbours, then a short target), and the
LM head (hidden x vocab) is a large share of a small model's cost. :func:`logits_from_first_target`
runs the backbone over the whole sequence but the head only from the position before the batch's
earliest target token, through ``transformers``' ``logits_to_keep``.

Right-padded batches (every row's padding at its end, as both SFT encoders build them) are run without
an attention mask: under causal attention a real token never sees the padding after it, and position
ids do not depend on the mask, so the logits at real positions are the same, and attention takes the
fused causal kernel instead of materialising a (T, T) mask.
"""

from __future__ import annotations

import torch

__all__ = [
    "pad_rows",
    "first_target_position",
    "forward_from_first_target",
    "logits_from_first_target",
    "right_padded",
]


def pad_rows(
    rows: list[list[int]], pad: int, left: bool = False, dtype: torch.dtype = torch.long
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, mask)``, both (B, W) with ``W`` the longest row: each row's values then ``pad`` (before
    them with ``left``, as generation wants), and ``mask`` (long) 1 on the row's own positions. The one
    padding rule of the package's batch encoders (token ids, part ids and masks alike)."""
    width = max((len(r) for r in rows), default=0)
    values = torch.full((len(rows), width), pad, dtype=dtype)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(width - len(r), width) if left else slice(0, len(r))
        values[i, span] = torch.tensor(list(r), dtype=dtype)
        mask[i, span] = 1
    return values, mask


def right_padded(attention_mask: torch.Tensor) -> bool:
    """Whether each row of ``attention_mask`` (B, T) is ones then zeros (padding only at the end)."""
    return bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all())


def first_target_position(loss_mask: torch.Tensor) -> int:
    """``max(j - 1, 0)`` for the first column ``j`` where any row of ``loss_mask`` (B, T) is set (0 if none).

    Logits at position ``j - 1`` predict the token at ``j``, so they are the first ones a loss needs.
    """
    cols = loss_mask.bool().any(dim=0).nonzero()
    return max(int(cols[0]) - 1, 0) if len(cols) else 0


def forward_from_first_target(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor, **kwargs
):
    """``(output, start)``: the model's output with logits (B, T - start, V) for positions ``start..T-1``
    only (``kwargs`` go to the model, e.g. ``output_hidden_states``; hidden states stay full length).

    Slice every (B, T) tensor that goes into the loss with ``[:, start:]``; the logits equal the full
    forward's ``logits[:, start:]`` at every non-padding position.
    """
    start = first_target_position(loss_mask)
    mask = None if right_padded(attention_mask) else attention_mask.long()  # fused causal kernel
    out = model(input_ids=input_ids, attention_mask=mask, logits_to_keep=input_ids.shape[1] - start, **kwargs)
    return out, start


def logits_from_first_target(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor
) -> tuple[torch.Tensor, int]:
    """``(logits, start)`` of :func:`forward_from_first_target`."""
    out, start = forward_from_first_target(model, input_ids, attention_mask, loss_mask)
    return out.logits, start
