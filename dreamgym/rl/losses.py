"""Policy-gradient loss math as pure functions of tensors and scalars (shared by PPO and GRPO).

Notation: ``logp`` = log pi_theta(token | prefix) of the current policy, ``old_logp`` = the same under the
policy that sampled the rollout, ``ref_logp`` under the frozen reference policy, ``A`` the advantage
broadcast to every response token, ``m`` the action mask (1 on the policy's own tokens). Token-level
losses are averaged over all masked tokens of the batch ("token mean").
"""

from __future__ import annotations

import torch

__all__ = [
    "masked_mean",
    "token_log_probs",
    "clipped_surrogate_loss",
    "approx_kl",
    "clip_fraction",
    "kl_k3",
    "clipped_value_loss",
    "entropy_from_logits",
]


def _check_same(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} has shape {tuple(a.shape)} but {name_b} has shape {tuple(b.shape)}; they must match"
        )


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum(x * m) / max(sum(m), 1)``: the mean of ``x`` over positions where ``mask`` is true."""
    _check_same("x", x, "mask", mask)
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp_min(1.0)


def token_log_probs(
    logits: torch.Tensor, input_ids: torch.Tensor, allowed: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-probs of each token given its prefix, aligned with ``input_ids``.

    ``out[n, t] = log softmax(logits[n, t-1])[input_ids[n, t]]`` for ``t >= 1``; ``out[n, 0] = 0``.
    With ``allowed`` (constrained decoding), positions whose set ``A = allowed[n, t]`` is non-empty use
    the distribution renormalised over ``A``:
    ``out[n, t] = z[input_ids[n, t]] - logsumexp_{v in A} z[v]`` with ``z = logits[n, t-1]``.

    Args:
        logits: (N, L, V) next-token logits of a causal LM on ``input_ids``.
        input_ids: (N, L) token ids.
        allowed: optional (N, L, K) allowed token ids per position, ``-1`` = padding (K may be 0).

    Returns:
        (N, L) float tensor.
    """
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape:
        raise ValueError(
            f"logits must be (N, L, V) matching input_ids {tuple(input_ids.shape)}, got {tuple(logits.shape)}"
        )
    z = logits[:, :-1].float()
    ids = input_ids[:, 1:].unsqueeze(-1)
    picked = torch.log_softmax(z, dim=-1).gather(-1, ids).squeeze(-1)
    if allowed is not None and allowed.shape[-1] > 0:
        za, has = _allowed_logits(z, allowed, input_ids.shape)
        constrained = z.gather(-1, ids).squeeze(-1) - torch.logsumexp(za, dim=-1)
        picked = torch.where(has, constrained, picked)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


def _allowed_logits(z: torch.Tensor, allowed: torch.Tensor, shape) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of the allowed tokens ((N, L-1, K), -inf on padding) and which positions are constrained."""
    if allowed.dim() != 3 or allowed.shape[:2] != shape:
        raise ValueError(
            f"allowed must be (N, L, K) matching input_ids {tuple(shape)}, got {tuple(allowed.shape)}"
        )
    a = allowed[:, 1:]
    za = z.gather(-1, a.clamp_min(0)).masked_fill(a < 0, float("-inf"))
    has = (a >= 0).any(-1)
    return za.masked_fill(~has.unsqueeze(-1), 0.0), has


def clipped_surrogate_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
) -> torch.Tensor:
    """PPO clipped surrogate, token mean.

    ``r = exp(logp - old_logp)``;
    ``L = mean_m[ -min(r * A, clip(r, 1 - eps, 1 + eps) * A) ]``.

    Args:
        logp: (N, L) current log-probs (carries the gradient).
        old_logp: (N, L) log-probs of the sampling policy.
        advantages: (N, L) advantage per token (a turn's advantage broadcast over its tokens).
        mask: (N, L) bool action mask.
        clip_eps: clip range eps.
    """
    _check_same("logp", logp, "old_logp", old_logp)
    _check_same("logp", logp, "advantages", advantages)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return masked_mean(-torch.minimum(unclipped, clipped), mask)


def approx_kl(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Approximate KL(pi_old || pi), token mean (a diagnostic of how far an update moved).

    ``r = exp(logp - old_logp)``; ``KL ~= mean_m[ (r - 1) - log r ]`` (the k3 estimator).
    """
    _check_same("logp", logp, "old_logp", old_logp)
    log_r = logp - old_logp
    return masked_mean(torch.exp(log_r) - 1.0 - log_r, mask)


def clip_fraction(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, clip_eps: float = 0.2
) -> torch.Tensor:
    """Share of masked tokens whose ratio ``r`` lies outside ``[1 - eps, 1 + eps]``."""
    _check_same("logp", logp, "old_logp", old_logp)
    ratio = torch.exp(logp - old_logp)
    return masked_mean(((ratio - 1.0).abs() > clip_eps).float(), mask)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(pi || pi_ref) by Schulman's unbiased, non-negative k3 estimator, token mean.

    ``d = ref_logp - logp``; ``k3 = exp(d) - d - 1`` (>= 0, zero iff the policies agree on the token).
    """
    _check_same("logp", logp, "ref_logp", ref_logp)
    d = ref_logp - logp
    return masked_mean(torch.exp(d) - d - 1.0, mask)


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_eps: float = 0.2
) -> torch.Tensor:
    """PPO clipped value loss, mean over turns.

    ``v_clip = old_v + clip(v - old_v, -eps, eps)``;
    ``L = 0.5 * mean[ max((v - R)^2, (v_clip - R)^2) ]``.

    Args:
        values: (N,) current critic values (carry the gradient).
        old_values: (N,) values at collection time.
        returns: (N,) value targets.
        clip_eps: clip range of the value change.
    """
    _check_same("values", values, "old_values", old_values)
    _check_same("values", values, "returns", returns)
    v_clip = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
    return 0.5 * torch.maximum((values - returns) ** 2, (v_clip - returns) ** 2).mean()


def entropy_from_logits(
    logits: torch.Tensor, mask: torch.Tensor, allowed: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean token entropy ``H = -sum_v p_v log p_v`` of the next-token distributions that predict the
    masked tokens (position ``t``'s token is predicted by ``logits[:, t-1]``). With ``allowed`` (see
    :func:`token_log_probs`), constrained positions use ``p`` renormalised over their allowed set.

    Args:
        logits: (N, L, V) logits.
        mask: (N, L) bool action mask aligned with the input ids.
        allowed: optional (N, L, K) allowed token ids per position (``-1`` = padding).
    """
    if logits.shape[:2] != mask.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be (N, L, V) matching mask {tuple(mask.shape)}")
    z = logits[:, :-1].float()
    lp = torch.log_softmax(z, dim=-1)
    ent = -(lp.exp() * lp).sum(-1)
    if allowed is not None and allowed.shape[-1] > 0:
        za, has = _allowed_logits(z, allowed, mask.shape)
        lpa = torch.log_softmax(za, dim=-1)
        ent_c = -(lpa.exp() * lpa.masked_fill(torch.isinf(za), 0.0)).sum(-1)
        ent = torch.where(has, ent_c, ent)
    return masked_mean(ent, mask[:, 1:])
