"""GRPO and GAE advantages against hand-computed numbers; the estimator registry."""

import math

import pytest
import torch

from dreamgym.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    GAEAdvantage,
    discounted_returns,
    gae_advantages,
    grpo_advantages,
    make_advantage_estimator,
)
from dreamgym.rl.rollout import Turn, build_rollout_batch, state_key


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


def _anchored(ep, t, reward, done, state):
    return Turn([1, 2], [3], reward, done, done, False, 0, 0, ep, t, state_key=state_key(state))


def test_discounted_returns_by_hand():
    # episode A = turns 0-2 (reward at its end), episode B = turn 3
    g = discounted_returns(torch.tensor([0.0, 0.0, 1.0, 0.5]), torch.tensor([False, False, True, True]), 0.5)
    assert g.tolist() == pytest.approx([0.25, 0.5, 1.0, 0.5])


def test_gigpo_adds_the_anchor_state_advantage_by_hand():
    # one task, three episodes; all start in "home"; A and B then reach "results", C goes elsewhere.
    # A buys from "results" (reward 1), B leaves "results" for "other" and fails, C fails.
    turns = [
        _anchored(0, 0, 0.0, False, "home"), _anchored(0, 1, 1.0, True, "results"),
        _anchored(1, 0, 0.0, False, "home"), _anchored(1, 1, 0.0, False, "results"),
        _anchored(1, 2, 0.0, True, "other"),
        _anchored(2, 0, 0.0, True, "home"),
    ]  # fmt: skip
    batch = build_rollout_batch(turns, pad_id=0)
    stats = make_advantage_estimator("gigpo", gamma=0.5, eps=0.0)(batch)
    assert stats["anchored_turns"] == pytest.approx(5 / 6)  # all but the turn in "other"
    # episode level (GRPO): scores (1, 0, 0): mean 1/3, std sqrt(2)/3 -> (sqrt 2, -1/sqrt 2, -1/sqrt 2)
    a, b = math.sqrt(2), -1 / math.sqrt(2)
    # step level: returns G = (0.5, 1 | 0, 0, 0 | 0); anchor "home": (0.5, 0, 0) -> (sqrt 2, b, b);
    # anchor "results": (1, 0) -> (+1, -1); "other" alone -> 0
    want = [a + a, a + 1, b + b, b - 1, b + 0, b + b]
    assert batch.advantages.tolist() == pytest.approx(want, abs=1e-5)


def test_gigpo_without_repeated_states_is_grpo():
    turns = [
        _anchored(0, 0, 0.0, False, "a"),
        _anchored(0, 1, 1.0, True, "b"),
        _anchored(1, 0, 0.0, True, "c"),
    ]
    grpo, gigpo = build_rollout_batch(turns, pad_id=0), build_rollout_batch(turns, pad_id=0)
    make_advantage_estimator("grpo")(grpo)
    make_advantage_estimator("gigpo")(gigpo)
    assert torch.equal(grpo.advantages, gigpo.advantages)
    assert not ADVANTAGE_ESTIMATORS["gigpo"].needs_critic


def test_state_key_is_stable_text_key():
    assert state_key("page 1") == state_key("page 1") != state_key("page 2")
    assert state_key("x") == 5717441744405258058  # blake2b: the same in every process and session
