"""The optimisation step of PPO/GRPO: ``epochs`` passes of ``minibatches`` optimizer steps over a scored
rollout batch, each minibatch run in micro-batches whose gradients are accumulated.

A minibatch's turns are ordered by length and each micro-batch is cut to its own longest turn
(:meth:`~dreamgym.rl.rollout.RolloutBatch.trimmed`): the sum over micro-batches is the same, the padding
is not run. Micro-batch ``j`` of a minibatch is weighted ``w_tok = tokens_j / tokens_minibatch`` (token-mean terms)
and ``w_turn = turns_j / turns_minibatch`` (the value loss), so the accumulated gradient equals the
whole minibatch's while peak memory stays bounded by the micro-batch. The trainer-specific parts
(backward under a strategy, gradient clipping, the optimizer step) come in as callables.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from dreamgym.rl.rollout import RolloutBatch

__all__ = ["minibatch_updates"]


def minibatch_updates(
    rollout: RolloutBatch,
    loss_fn: Callable[[RolloutBatch, float, float], dict[str, torch.Tensor]],
    zero_grad: Callable[[], None],
    backward: Callable[[torch.Tensor], None],
    step: Callable[[], None],
    epochs: int = 1,
    minibatches: int = 2,
    micro_batch_size: int = 16,
) -> dict[str, float]:
    """Run the updates; return the mean over optimizer steps of each part of ``loss_fn``'s output.

    Args:
        rollout: the scored batch (advantages filled).
        loss_fn: ``(micro_batch, w_tok, w_turn) -> parts`` with the weighted ``"loss"`` and unweighted parts
            (e.g. :class:`~dreamgym.rl.objective.ClipPPOLoss` behind the policy's forward pass).
        zero_grad, backward, step: the optimizer's ``zero_grad``; backward of a loss; gradient clipping +
            the optimizer's ``step``.
        epochs: passes over the batch, each in a fresh random order.
        minibatches: optimizer steps per pass (the turns split into this many near-equal parts; an empty
            part, when there are fewer turns, reuses the pass's first turn so every rank steps alike).
        micro_batch_size: turns per forward/backward.
    """
    n = rollout.batch_size[0]
    sums: dict[str, float] = {}
    steps = 0
    for _ in range(epochs):
        perm = torch.randperm(n, device=rollout.device)
        for idx in torch.tensor_split(perm, minibatches):
            mb = rollout[rollout.longest_first(idx if idx.numel() else perm[:1])]
            tokens = float(mb.action_mask.sum().clamp_min(1))
            zero_grad()
            step_parts: dict[str, float] = {}
            for s in range(0, mb.batch_size[0], micro_batch_size):
                micro = mb[s : s + micro_batch_size].trimmed()
                w_tok = float(micro.action_mask.sum()) / tokens
                w_turn = micro.batch_size[0] / mb.batch_size[0]
                parts = loss_fn(micro, w_tok, w_turn)
                backward(parts["loss"])
                for k, v in parts.items():  # the minibatch's value of each part: a weighted sum
                    w = 1.0 if k == "loss" else (w_turn if k == "loss_value" else w_tok)
                    step_parts[k] = step_parts.get(k, 0.0) + w * float(v.detach())
            step()
            for k, v in step_parts.items():
                sums[k] = sums.get(k, 0.0) + v
            steps += 1
    return {k: v / max(steps, 1) for k, v in sums.items()}
