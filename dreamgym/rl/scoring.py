"""The policy's one scoring forward (:func:`policy_forward`), and scoring a rollout batch before the
update with it (no grad): the sampling policy's log-probs ``old_log_probs``, the reference policy's
``ref_log_probs`` and the critic's ``old_values`` (see :mod:`dreamgym.rl.rollout`). The training step
(:meth:`models.policy_rl.PolicyRL.policy_loss`) runs the same :func:`policy_forward` with grad.

Logits are computed only from the first action position on
(:func:`~dreamgym.modeling.forward.forward_from_first_target`): every scored token lives there. With
constrained decoding the log-probs are renormalised over the tokens that were allowed (``allowed_ids``),
the distribution the actions were sampled from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dreamgym.modeling.forward import forward_from_first_target
from dreamgym.rl.losses import token_log_probs
from dreamgym.rl.rollout import RolloutBatch

__all__ = ["PolicyForward", "policy_forward", "score_rollout"]


@dataclass
class PolicyForward:
    """One forward pass of the policy (and critic) over turns, from column ``start`` on (``S = L - start``)."""

    log_probs: torch.Tensor  # (N, S) float  log pi(input_ids[:, start:] | prefix), over allowed_ids if set
    logits: torch.Tensor  # (N, S, V) float  next-token logits at columns start..L-1
    values: torch.Tensor | None  # (N,) float  critic value V(s_t) of each turn (None: no critic)
    start: int  # the first action position: slice every (N, L) tensor of the loss with [:, start:]


def policy_forward(policy, mb: RolloutBatch, critic=None) -> PolicyForward:
    """Log-probs of ``mb``'s tokens under ``policy`` and (with a ``critic``) its values, in one forward.

    ``log_probs[n, j] = log pi(input_ids[n, start + j] | input_ids[n, :start + j])``
    (:func:`~dreamgym.rl.losses.token_log_probs`, renormalised over ``allowed_ids`` where a set is
    given); a critic sharing the policy's backbone reads the same pass's last hidden states. Gradients
    flow unless the caller runs it under ``torch.no_grad``.

    Args:
        policy: a causal LM.
        mb: the turns (:class:`~dreamgym.rl.rollout.RolloutBatch`), on the policy's device.
        critic: a :class:`~dreamgym.rl.critic.Critic` (``None``: ``values`` is ``None``).
    """
    shared = critic is not None and critic.shares_backbone
    out, start = forward_from_first_target(
        policy, mb.input_ids, mb.attention_mask, mb.action_mask, output_hidden_states=shared
    )
    logp = token_log_probs(out.logits, mb.input_ids[:, start:], mb.allowed_ids[:, start:])
    values = None
    if critic is not None:
        hidden = out.hidden_states[-1] if shared else None
        values = critic.values(mb.input_ids, mb.attention_mask, mb.action_mask, hidden)
    return PolicyForward(logp, out.logits, values, start)


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
    order = rollout.longest_first()
    for s in range(0, rollout.batch_size[0], batch_size):
        rows = order[s : s + batch_size]
        mb = rollout[rows].trimmed()
        end = mb.input_ids.shape[1]
        fwd = policy_forward(policy, mb, critic)
        start, act = fwd.start, mb.action_mask[:, fwd.start :]
        rollout.old_log_probs[rows] = 0.0
        rollout.old_log_probs[rows, start:end] = fwd.log_probs * act
        if ref_logits is not None:
            ref = ref_logits(mb.input_ids, mb.attention_mask, mb.action_mask)
            ids, allowed = mb.input_ids[:, start:], mb.allowed_ids[:, start:]
            rollout.ref_log_probs[rows] = 0.0
            rollout.ref_log_probs[rows, start:end] = token_log_probs(ref, ids, allowed) * act
        if fwd.values is not None:
            rollout.old_values[rows] = fwd.values
    policy.train(was)
