"""Advantage estimators, a small registry keyed by name: ``"grpo"``, ``"gigpo"`` and ``"gae"``.

The estimator is the only difference between GRPO and PPO in :class:`models.policy_rl.PolicyRL`
(PPO also trains a critic). An estimator fills ``batch.advantages`` and ``batch.returns`` of a
:class:`dreamgym.rl.rollout.RolloutBatch` in place; the math lives in the pure functions below.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from dreamgym.rl.rollout import RolloutBatch

__all__ = [
    "group_moments",
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "GRPOAdvantage",
    "GAEAdvantage",
    "GiGPOAdvantage",
    "grpo_advantages",
    "gae_advantages",
    "discounted_returns",
    "register_advantage_estimator",
    "make_advantage_estimator",
]

ADVANTAGE_ESTIMATORS: dict[str, type[AdvantageEstimator]] = {}
"""name -> estimator class."""


def register_advantage_estimator(name: str) -> Callable[[type], type]:
    """Class decorator: register an :class:`AdvantageEstimator` subclass under ``name``."""

    def deco(cls: type) -> type:
        cls.name = name
        ADVANTAGE_ESTIMATORS[name] = cls
        return cls

    return deco


def make_advantage_estimator(name: str, **kwargs) -> AdvantageEstimator:
    """Build the estimator registered as ``name``."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise KeyError(f"unknown advantage estimator {name!r}; registered: {sorted(ADVANTAGE_ESTIMATORS)}")
    return ADVANTAGE_ESTIMATORS[name](**kwargs)


def group_moments(
    scores: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group ``mean_g = mean_{i in g} s_i`` and ``var_g = mean_{i in g} (s_i - mean_g)^2`` (population
    variance), and each score's group index ``inv`` (groups numbered in sorted id order). The one group
    statistic of the package: GRPO normalises by it, the curriculum selects tasks by ``var_g``.

    Args:
        scores: (E,) float scores.
        group_ids: (E,) group of each score.
    """
    _, inv = torch.unique(group_ids, return_inverse=True)
    n_groups = int(inv.max().item()) + 1 if inv.numel() else 0
    zeros = scores.new_zeros(n_groups)  # on the scores' device and in their (float) dtype
    count = zeros.index_add(0, inv, torch.ones_like(scores))
    mean = zeros.index_add(0, inv, scores) / count
    var = zeros.index_add(0, inv, (scores - mean[inv]) ** 2) / count
    return mean, var, inv


def grpo_advantages(
    scores: torch.Tensor, group_ids: torch.Tensor, scale_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-normalised outcome advantages.

    For episode ``i`` in group ``g``: ``A_i = (R_i - mean_g R) / (std_g R + eps)`` with ``scale_std``,
    else ``A_i = R_i - mean_g R``. ``std_g`` is the population std (``sqrt(mean_g (R - mean_g R)^2)``),
    so a group whose rollouts all got the same reward has ``A = 0`` (also with ``eps = 0``).

    Args:
        scores: (E,) outcome reward of each episode.
        group_ids: (E,) int group of each episode (rollouts of the same task).
        scale_std: divide by the group's std.
        eps: added to the std.

    Returns:
        (E,) float advantages (float32 for lower-precision scores) on the scores' device.
    """
    if scores.dim() != 1 or scores.shape != group_ids.shape:
        raise ValueError(
            f"scores and group_ids must both be (E,), got {tuple(scores.shape)} and {tuple(group_ids.shape)}"
        )
    scores = scores.float()
    mean, var, inv = group_moments(scores, group_ids)
    centred = scores - mean[inv]
    if not scale_std:
        return centred
    std = var.sqrt()[inv]
    return torch.where(std > 0, centred / (std + eps), torch.zeros_like(centred))


def gae_advantages(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float = 1.0, lam: float = 0.95
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level generalised advantage estimation over contiguous episodes.

    With ``V_{t+1} = 0`` after the last turn of an episode (``done_t``)::

        delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
        R_t     = A_t + V_t                                   (value target)

    Args:
        rewards: (N,) reward after each turn.
        values: (N,) critic value of each turn's state.
        dones: (N,) bool, the episode ended after this turn. Turns of an episode are contiguous and in
            order, and the batch's last turn must end its episode.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, each (N,) float (float32 for lower-precision inputs) on the values' device.
    """
    if not (rewards.shape == values.shape == dones.shape) or rewards.dim() != 1:
        raise ValueError(
            f"rewards, values, dones must all be (N,), got {tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(dones.shape)}"
        )
    n = rewards.shape[0]
    if n and not bool(dones[-1]):
        raise ValueError(
            "gae_advantages: the last turn must end its episode (dones[-1] is False); pass whole episodes"
        )
    values, rewards = values.float(), rewards.float()
    cont = (~dones.bool()).to(values.dtype)
    next_values = torch.cat([values[1:], values.new_zeros(1)]) * cont
    delta = rewards + gamma * next_values - values
    decay = gamma * lam * cont
    adv = torch.empty_like(delta)
    running = delta.new_zeros(())
    for t in range(n - 1, -1, -1):  # A_t = delta_t + decay_t * A_{t+1}, on the values' device
        running = delta[t] + decay[t] * running
        adv[t] = running
    return adv, adv + values


def discounted_returns(rewards: torch.Tensor, dones: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Return-to-go of every turn of contiguous, ordered episodes::

        G_t = r_t + gamma * G_{t+1} * (1 - done_t)

    Args:
        rewards: (N,) reward after each turn.
        dones: (N,) bool, the episode ended after this turn (the batch's last turn must end its episode).
        gamma: discount per turn.

    Returns:
        (N,) float32 returns on the rewards' device.
    """
    zeros = torch.zeros_like(rewards, dtype=torch.float32)
    adv, _ = gae_advantages(rewards, zeros, dones, gamma=gamma, lam=1.0)  # with V = 0, A_t = G_t
    return adv


class AdvantageEstimator:
    """Fills ``batch.advantages`` and ``batch.returns``; ``needs_critic`` says if values are used. A call
    may return a dict of the estimator's own metrics (logged as ``adv/<name>``), else ``None``."""

    name: str = ""
    needs_critic: bool = False

    def __call__(self, batch: RolloutBatch) -> dict[str, float] | None:
        raise NotImplementedError


@register_advantage_estimator("grpo")
class GRPOAdvantage(AdvantageEstimator):
    """GRPO: each episode's summed (outcome) reward normalised within its group; every turn (and so
    every policy token) of the episode gets the episode's advantage.

    Args:
        scale_std: divide by the group's reward std (off: Dr. GRPO-style mean-centring only).
        eps: added to the std.
    """

    needs_critic = False

    def __init__(self, scale_std: bool = True, eps: float = 1e-6):
        self.scale_std = scale_std
        self.eps = eps

    def __call__(self, batch: RolloutBatch) -> None:
        scores = batch.episode_rewards()
        ep_group = torch.zeros_like(scores, dtype=torch.long).scatter_(0, batch.episode_id, batch.group_id)
        ep_adv = grpo_advantages(scores, ep_group, self.scale_std, self.eps)
        batch.advantages = ep_adv[batch.episode_id]
        batch.returns = scores[batch.episode_id]


@register_advantage_estimator("gae")
class GAEAdvantage(AdvantageEstimator):
    """PPO's turn-level GAE from the critic's values (see :func:`gae_advantages`).

    Args:
        gamma: discount per turn.
        lam: GAE lambda.
        normalize: whiten the advantages over the batch (mean 0, std 1).
    """

    needs_critic = True

    def __init__(self, gamma: float = 1.0, lam: float = 0.95, normalize: bool = True):
        self.gamma, self.lam, self.normalize = gamma, lam, normalize

    def __call__(self, batch: RolloutBatch) -> None:
        adv, ret = gae_advantages(batch.rewards, batch.old_values, batch.dones, self.gamma, self.lam)
        if self.normalize and adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-6)
        batch.advantages = adv
        batch.returns = ret


@register_advantage_estimator("gigpo")
class GiGPOAdvantage(AdvantageEstimator):
    """GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization", verl-agent): GRPO's episode-level
    advantage plus a step-level one from *anchor states*, states met by several episodes of one task::

        A_t = A^E(episode of t) + step_weight * A^S_t
        A^S_t = (G_t - mean_{a(t)} G) / (std_{a(t)} G + eps)      (scale_std; else G_t - mean_{a(t)} G)

    where ``G_t = sum_{k >= t} gamma^(k-t) r_k`` is the turn's discounted return and ``a(t)`` the anchor
    group: the turns of the same GRPO group (task) that acted in the same state (same
    :attr:`~dreamgym.rl.rollout.RolloutBatch.state_key`). A turn alone in its anchor group, or in a group
    whose returns are all equal, gets ``A^S = 0``, so with no repeated states GiGPO is GRPO.

    Args:
        step_weight: weight of the step-level advantage (verl-agent: 1.0).
        gamma: discount of the step-level return (verl-agent: 0.95).
        scale_std: divide both levels by their group's std.
        eps: added to the std.
    """

    needs_critic = False

    def __init__(
        self, step_weight: float = 1.0, gamma: float = 0.95, scale_std: bool = True, eps: float = 1e-6
    ):
        self.step_weight, self.gamma = step_weight, gamma
        self.episode = GRPOAdvantage(scale_std=scale_std, eps=eps)

    def __call__(self, batch: RolloutBatch) -> dict[str, float]:
        """Fill the advantages; return ``anchored_turns`` (the fraction of turns that share their anchor
        state with another turn: the only ones a step-level advantage can reach) and ``step_abs`` (mean
        ``|A^S|``)."""
        self.episode(batch)  # fills A^E (per turn) and the returns
        g = discounted_returns(batch.rewards, batch.dones, self.gamma).to(batch.advantages.device)
        _, anchor = torch.unique(
            torch.stack([batch.group_id, batch.state_key], 1), dim=0, return_inverse=True
        )
        step = grpo_advantages(g, anchor, self.episode.scale_std, self.episode.eps)
        batch.advantages = batch.advantages + self.step_weight * step
        shared = torch.bincount(anchor)[anchor] > 1
        return {"anchored_turns": shared.float().mean().item(), "step_abs": step.abs().mean().item()}
