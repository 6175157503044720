"""Multi-turn batched collection through a TextEnvBase env into the rollout schema."""

import pytest
from rl_toy import LETTERS, LetterEnv, make_toy_tokenizer

from dreamgym.envs.base import TextStep
from dreamgym.modeling import LanguageModel
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.rl.collector import RolloutCollector
from dreamgym.rl.rollout import build_rollout_batch


@pytest.fixture(scope="module")
def toy_lm(tmp_path_factory):
    path = make_toy_tokenizer(tmp_path_factory.mktemp("tok"))
    return LanguageModel(preset="tiny", tokenizer_path=path, max_positions=512).build()


def test_collect_groups_and_counts(toy_lm):
    model, tok = toy_lm
    env = LetterEnv(batch_size=[3], max_steps=3)  # fewer slots than episodes: slots get refilled
    col = RolloutCollector(max_new_tokens=6, max_prompt_tokens=200)
    out = col.collect(env, model, tok, task_indices=[0, 5], group_size=4)
    assert len(out.episodes) == 8
    assert [e.group_id for e in out.episodes] == [0] * 4 + [1] * 4
    assert {e.task_index for e in out.episodes} == {0, 5}
    assert all(e.instruction.endswith("letter " + "eaotisnr"[e.task_index]) for e in out.episodes)
    # every env step was counted exactly once and became one turn
    assert out.transitions == len(out.turns) == sum(len(e.actions) for e in out.episodes)
    # each turn's tokens are those its episode recorded for that step
    recorded = [(e.episode_id, t, g) for e in out.episodes for t, g in enumerate(e.generated)]
    assert [(t.episode_id, t.turn, t.prompt_ids, t.response_ids) for t in out.turns] == [
        (i, t, g.prompt_ids, g.response_ids) for i, t, g in recorded
    ]
    assert out.generated_tokens == sum(len(t.response_ids) for t in out.turns)
    assert all(1 <= len(e.actions) <= 3 for e in out.episodes)
    # turns ordered by episode then step; the last turn of each episode is done
    batch = build_rollout_batch(out.turns, pad_id=tok.pad_token_id)
    ep, turn = batch.episode_id.tolist(), batch.turn.tolist()
    assert ep == sorted(ep)
    for i in range(len(ep)):
        last = i == len(ep) - 1 or ep[i + 1] != ep[i]
        assert bool(batch.dones[i]) == last
        if not last:
            assert turn[i + 1] == turn[i] + 1
    # the action mask covers exactly the response tokens
    for i, t in enumerate(out.turns):
        assert batch.action_mask[i].sum().item() == len(t.response_ids)
        assert not batch.action_mask[i, : len(t.prompt_ids)].any()
    m = out.metrics()
    assert set(m) == {"reward_mean", "success_rate", "score_mean", "steps_mean", "invalid_rate"}
    traj = out.episodes[0].to_trajectory("letters", "train", "synthetic")
    assert len(traj.transitions) == len(out.episodes[0].actions) and traj.transitions[-1].done


def test_budget_cap_is_never_exceeded(toy_lm):
    model, tok = toy_lm
    env = LetterEnv(batch_size=[4], max_steps=5)
    out = RolloutCollector(max_new_tokens=4).collect(env, model, tok, [1, 2], group_size=4, max_transitions=6)
    assert out.transitions <= 6
    assert all(e.actions for e in out.episodes)
    assert out.turns[-1].done


def test_greedy_is_deterministic(toy_lm):
    model, tok = toy_lm
    col = RolloutCollector(max_new_tokens=5)
    a = col.collect(LetterEnv(batch_size=[2], max_steps=2), model, tok, [0, 1], greedy=True)
    b = col.collect(LetterEnv(batch_size=[2], max_steps=2), model, tok, [0, 1], greedy=True)
    assert [e.actions for e in a.episodes] == [e.actions for e in b.episodes]


def test_policy_format_round_trip():
    fmt = PolicyFormat(history_window=1, think=True)
    p = fmt.prompt("buy shoes", "search page", ["search[...]"], [("s0", "a0"), ("s1", "a1")])
    assert "s1" in p and "s0" not in p and p.endswith("Action:")
    assert fmt.parse(fmt.target("click[buy now]", "it matches")).action == "click[buy now]"
    assert fmt.parse(" Action: search[red shoes]\nmore").action == "search[red shoes]"
    bad = fmt.parse("<think>never closed")
    assert not bad.ok


class _ScoredLetters(LetterEnv):
    """LetterEnv whose score differs from its reward (0.5 for any non-empty action, 1 for a win)."""

    def _act(self, slot, action):
        step = super()._act(slot, action)
        step.score = 0.0 if step.invalid else 0.5 + 0.5 * step.reward
        return step


def test_learning_reward_score_trains_on_the_env_score(toy_lm):
    model, tok = toy_lm
    for learning_reward, field in (("reward", "rewards"), ("score", "scores")):
        col = RolloutCollector(max_new_tokens=6, max_prompt_tokens=200, learning_reward=learning_reward)
        out = col.collect(_ScoredLetters(batch_size=[4], max_steps=2), model, tok, [0, 1], group_size=2)
        expected = [r for e in out.episodes for r in getattr(e, field)]
        assert [t.reward for t in out.turns] == expected
        assert any(e.scores != e.rewards for e in out.episodes)
    with pytest.raises(ValueError, match="learning_reward='bonus'"):
        RolloutCollector(learning_reward="bonus")


class _FailingSimLetters(LetterEnv):
    """LetterEnv whose simulator fails (``sim_error``, episode ended, reward 0) on task 1's episodes."""

    def _act(self, slot, action):
        if self._letter[slot] == LETTERS[1]:
            return TextStep("[simulation failed]", [], terminated=True, sim_error=True)
        return super()._act(slot, action)


def test_episodes_cut_by_a_simulation_failure_are_not_learned_from(toy_lm):
    """#39: a sim_error (experience-model parse failure, server failure) ended the episode with reward 0
    and it was trained on as the policy's failure. Now its turns leave the update; the episode still
    counts in the metrics and in ``episodes``."""
    model, tok = toy_lm
    col = RolloutCollector(max_new_tokens=6, max_prompt_tokens=200)
    out = col.collect(_FailingSimLetters(batch_size=[4], max_steps=2), model, tok, [0, 1], group_size=2)
    failed = [e for e in out.episodes if e.task_index == 1]
    assert len(out.episodes) == 4 and len(failed) == 2 and all(e.sim_error for e in failed)
    assert out.learned_episodes == [e for e in out.episodes if e.task_index == 0]
    assert out.turns and {t.group_id for t in out.turns} == {0}  # no turn of task 1's group
    assert sum(len(e.actions) for e in out.learned_episodes) == len(out.turns)
