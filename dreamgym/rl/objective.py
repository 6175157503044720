"""THE PPO/GRPO objective as one object with its coefficients (torchrl ``ClipPPOLoss`` style).

PPO and GRPO share it; they differ only in the advantage estimator and the critic. The object holds
the coefficients and combines the pure terms of :mod:`dreamgym.rl.losses`; it sees tensors only (the
LightningModule runs the forward passes), so it is tested and reused without a model or a trainer.
"""

from __future__ import annotations

import torch

from dreamgym.rl.losses import (
    approx_kl,
    clip_fraction,
    clipped_surrogate_loss,
    clipped_value_loss,
    entropy_from_logits,
    kl_k3,
)

__all__ = ["ClipPPOLoss"]


class ClipPPOLoss:
    """``loss = w_tok * (L_clip + kl_coef * KL_k3(pi || pi_ref) - entropy_coef * H) + w_turn * value_coef * L_V``

    with ``L_clip`` the clipped surrogate (:func:`~dreamgym.rl.losses.clipped_surrogate_loss`, token mean),
    ``KL_k3`` to the frozen reference policy, ``H`` the policy entropy over the allowed tokens and ``L_V``
    the clipped value loss (turn mean; only with a critic). ``w_tok`` / ``w_turn`` are a micro-batch's
    share of its minibatch's action tokens / turns, so micro-batches add up to the minibatch's means.

    Args:
        clip_eps: policy ratio clip range.
        kl_coef: coefficient of the k3 KL to the reference policy (0: no reference policy is needed).
        entropy_coef: coefficient of the entropy bonus (0: the entropy is still reported).
        value_coef: coefficient of the value loss.
        value_clip_eps: value clip range.
    """

    def __init__(
        self,
        clip_eps: float = 0.2,
        kl_coef: float = 0.01,
        entropy_coef: float = 0.0,
        value_coef: float = 0.5,
        value_clip_eps: float = 0.2,
    ):
        bad = {k: v for k, v in locals().items() if k != "self" and v < 0}
        if bad:
            raise ValueError(f"ClipPPOLoss: {bad} must be >= 0")
        self.clip_eps, self.kl_coef, self.entropy_coef = clip_eps, kl_coef, entropy_coef
        self.value_coef, self.value_clip_eps = value_coef, value_clip_eps

    @property
    def needs_reference(self) -> bool:
        """Whether the KL term needs the reference policy's log-probs."""
        return self.kl_coef > 0

    def __call__(
        self,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        logits: torch.Tensor,
        allowed: torch.Tensor | None = None,
        ref_logp: torch.Tensor | None = None,
        values: torch.Tensor | None = None,
        old_values: torch.Tensor | None = None,
        returns: torch.Tensor | None = None,
        token_weight: float = 1.0,
        turn_weight: float = 1.0,
    ) -> dict[str, torch.Tensor]:
        """The loss and its parts (the parts unweighted; ``approx_kl`` and ``clipfrac`` without grad).

        Args:
            logp, old_logp, mask: (N, T) log-probs of the current / sampling policy and the action mask.
            advantages: (N,) one advantage per turn, shared by its response tokens.
            logits: (N, T, V) the current policy's logits at the same positions (for the entropy).
            allowed: (N, T, K) the token ids constrained decoding allowed (``-1`` padding) or None.
            ref_logp: (N, T) reference log-probs (needed when ``kl_coef > 0``).
            values, old_values, returns: (N,) critic values now / at collection and value targets
                (``values=None``: no critic, no value loss).
            token_weight, turn_weight: ``w_tok`` and ``w_turn`` of the formula.
        """
        adv = advantages.unsqueeze(1).expand_as(logp)
        parts = {"loss_policy": clipped_surrogate_loss(logp, old_logp, adv, mask, self.clip_eps)}
        token_loss = parts["loss_policy"]
        if self.kl_coef > 0:
            if ref_logp is None:
                raise ValueError("ClipPPOLoss: kl_coef > 0 needs ref_logp (the reference policy's log-probs)")
            parts["kl_ref"] = kl_k3(logp, ref_logp, mask)
            token_loss = token_loss + self.kl_coef * parts["kl_ref"]
        if self.entropy_coef > 0:
            parts["entropy"] = entropy_from_logits(logits, mask, allowed)
            token_loss = token_loss - self.entropy_coef * parts["entropy"]
        else:
            with torch.no_grad():
                parts["entropy"] = entropy_from_logits(logits, mask, allowed)
        loss = token_weight * token_loss
        if values is not None:
            parts["loss_value"] = clipped_value_loss(values, old_values, returns, self.value_clip_eps)
            loss = loss + turn_weight * self.value_coef * parts["loss_value"]
        with torch.no_grad():
            parts["approx_kl"] = approx_kl(logp, old_logp, mask)
            parts["clipfrac"] = clip_fraction(logp, old_logp, mask, self.clip_eps)
        parts["loss"] = loss
        return parts

    def __repr__(self) -> str:
        return (
            f"ClipPPOLoss(clip_eps={self.clip_eps}, kl_coef={self.kl_coef}, entropy_coef={self.entropy_coef}, "
            f"value_coef={self.value_coef}, value_clip_eps={self.value_clip_eps})"
        )
