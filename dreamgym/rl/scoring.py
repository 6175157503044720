"""Scoring a rollout batch before the update (no grad): the sampling policy's log-probs ``old_log_probs``,
the reference policy's ``ref_log_probs`` and the critic's ``old_values`` (see :mod:`dreamgym.rl.rollout`).

Logits are computed only from the first action position on
(:func:`~dreamgym.modeling.forward.forward_from_first_target`): every scored token lives there. With
constrained decoding the log-probs are renormalised over the tokens that were allowed (``allowed_ids``),
the distribution the actions were sampled from.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from dreamgym.modeling.forward import forward_from_first_target
from dreamgym.rl.losses import token_log_probs
from dreamgym.rl.rollout import RolloutBatch

__all__ = ["score_rollout"]


@torch.no_grad()
def score_rollout(
    rollout: RolloutBatch,
    policy,
    ref_logits: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    critic=None,
    batch_size: int = 16,
) -> None:
    """Fill ``rollout``'s ``old_log_probs`` (0 off the action mask), ``ref_log_probs`` when ``ref_logits``
    is given, and ``old_values`` with a ``critic``, in chunks of ``batch_size`` turns of similar length, each
    run at its own width (:meth:`~dreamgym.rl.rollout.RolloutBatch.trimmed`).

    Args:
        rollout: the batch, on the policy's device.
        policy: the causal LM that sampled the rollout (put in eval mode for the call).
        ref_logits: ``(input_ids, attention_mask, action_mask) -> logits`` of the reference policy from
            the first action position on (``None``: no KL term, no reference log-probs).
        critic: a :class:`~dreamgym.rl.critic.Critic` (``None``: values stay 0).
        batch_size: turns per forward pass.
    """
    was = policy.training
    policy.eval()
    shared = critic is not None and critic.shares_backbone
    order = rollout.longest_first()
    for s in range(0, rollout.batch_size[0], batch_size):
        rows = order[s : s + batch_size]
        mb = rollout[rows].trimmed()
        end = mb.input_ids.shape[1]
        out, start = forward_from_first_target(
            policy, mb.input_ids, mb.attention_mask, mb.action_mask, output_hidden_states=shared
        )
        ids, allowed, act = mb.input_ids[:, start:], mb.allowed_ids[:, start:], mb.action_mask[:, start:]
        rollout.old_log_probs[rows] = 0.0
        rollout.old_log_probs[rows, start:end] = token_log_probs(out.logits, ids, allowed) * act
        if ref_logits is not None:
            ref = ref_logits(mb.input_ids, mb.attention_mask, mb.action_mask)
            rollout.ref_log_probs[rows] = 0.0
            rollout.ref_log_probs[rows, start:end] = token_log_probs(ref, ids, allowed) * act
        if critic is not None:
            hidden = out.hidden_states[-1] if shared else None
            rollout.old_values[rows] = critic.values(mb.input_ids, mb.attention_mask, mb.action_mask, hidden)
    policy.train(was)
