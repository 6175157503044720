"""GRPO and GAE advantages against hand-computed numbers; the estimator registry."""

import math

import pytest
import torch

from dreamgym.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    GAEAdvantage,
    gae_advantages,
    grpo_advantages,
    make_advantage_estimator,
)
from dreamgym.rl.rollout import Turn, build_rollout_batch


def test_grpo_by_hand():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    # group 0: mean 0.5, std 0.5 -> +-1; group 1: identical rewards -> 0
    adv = grpo_advantages(scores, groups, scale_std=True, eps=0.0)
    assert adv.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0, 0.0, 0.0])
    adv = grpo_advantages(scores, groups, scale_std=False)
    assert adv.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.0, 0.0])


def test_grpo_unequal_group():
    # mean 1/3; var = ((2/3)^2 + 2 (1/3)^2) / 3 = 2/9; std = 0.4714
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([7, 7, 7]), eps=0.0)
    std = math.sqrt(2 / 9)
    assert adv.tolist() == pytest.approx([(2 / 3) / std, -(1 / 3) / std, -(1 / 3) / std], abs=1e-5)


def test_gae_by_hand():
    rewards = torch.tensor([0.0, 1.0, 0.0])
    values = torch.tensor([0.5, 0.8, 0.2])
    dones = torch.tensor([False, True, True])  # episode A = turns 0-1, episode B = turn 2
    adv, ret = gae_advantages(rewards, values, dones, gamma=0.9, lam=0.5)
    # t2: -0.2; t1: 1 - 0.8 = 0.2; t0: delta = 0.9*0.8 - 0.5 = 0.22, A = 0.22 + 0.9*0.5*0.2 = 0.31
    assert adv.tolist() == pytest.approx([0.31, 0.2, -0.2], abs=1e-6)
    assert ret.tolist() == pytest.approx([0.81, 1.0, 0.0], abs=1e-6)


def test_gae_needs_whole_episodes():
    with pytest.raises(ValueError, match="last turn"):
        gae_advantages(torch.zeros(2), torch.zeros(2), torch.tensor([True, False]))


def _turn(ep, t, reward, done, group):
    return Turn(
        [1, 2], [3], reward, done, done, False, task_index=group, group_id=group, episode_id=ep, turn=t
    )


def test_grpo_estimator_broadcasts_episode_advantage_to_every_turn():
    # group 0: episode 0 (2 turns, success), episode 1 (1 turn, fail)
    turns = [_turn(0, 0, 0.0, False, 0), _turn(0, 1, 1.0, True, 0), _turn(1, 0, 0.0, True, 0)]
    batch = build_rollout_batch(turns, pad_id=0)
    make_advantage_estimator("grpo", eps=0.0)(batch)
    assert batch.advantages.tolist() == pytest.approx([1.0, 1.0, -1.0])
    assert set(ADVANTAGE_ESTIMATORS) >= {"grpo", "gae"}
    assert not ADVANTAGE_ESTIMATORS["grpo"].needs_critic and GAEAdvantage.needs_critic


def test_gae_estimator_normalises():
    turns = [_turn(0, 0, 0.0, False, 0), _turn(0, 1, 1.0, True, 0), _turn(1, 0, 0.0, True, 0)]
    batch = build_rollout_batch(turns, pad_id=0)
    GAEAdvantage(gamma=1.0, lam=1.0, normalize=True)(batch)
    assert batch.advantages.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert batch.returns.tolist() == pytest.approx([1.0, 1.0, 0.0])


def test_unknown_estimator_is_named():
    with pytest.raises(KeyError, match="registered"):
        make_advantage_estimator("reinforce++")
