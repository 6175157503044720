"""The one episode loop (`dreamgym.envs.episodes.run_episodes`): waves, budgets, hooks, schema records."""

import pytest
from rl_toy import LetterEnv

from dreamgym.envs.episodes import Episode, run_episodes, trajectory_metrics
from dreamgym.envs.replay import replay_actions


def _actor(env, lengths: dict[int, int], log: list):
    """Task i's episode says an empty (invalid) word until its step ``lengths[i]``, then the letter."""

    def act(slots, episodes):
        log.append([(i, ep.episode_id) for i, ep in zip(slots, episodes, strict=True)])
        out = []
        for ep in episodes:
            letter = ep.instruction[-1]
            out.append(letter if len(ep.actions) + 1 >= lengths[ep.task_index] else "")
        return out

    return act


def test_episodes_run_in_waves_and_record_every_step():
    env = LetterEnv(batch_size=[2], max_steps=10)
    log: list = []
    # episodes 0 and 1 (tasks 0, 1) take 1 and 3 steps; a slot-refilling loop would start episode 2 in
    # slot 0 at the second step, a wave loop only after episode 1 has ended
    episodes, steps = run_episodes(env, _actor(env, {0: 1, 1: 3, 2: 2, 3: 1}, log), [0, 1, 2, 3])
    assert log == [
        [(0, 0), (1, 1)], [(1, 1)], [(1, 1)],  # wave 1: slot 0 idles while episode 1 runs
        [(0, 2), (1, 3)], [(0, 2)],  # wave 2
    ]  # fmt: skip
    assert steps == 1 + 3 + 2 + 1
    assert [len(e.actions) for e in episodes] == [1, 3, 2, 1]
    assert all(e.success and e.terminated and not e.truncated for e in episodes)
    second = episodes[1]
    assert second.invalid == [True, True, False] and second.rewards == [0.0, 0.0, 1.0]
    assert len(second.states) == len(second.available) == 4  # s_0 .. s_T
    traj = second.to_trajectory("letters", "train", "real", policy="scripted", trajectory_id="t-1")
    assert [t.step for t in traj.transitions] == [0, 1, 2] and traj.success and traj.trajectory_id == "t-1"
    assert [t.done for t in traj.transitions] == [False, False, True]
    assert {t.trajectory_id for t in traj.transitions} == {"t-1"}
    assert trajectory_metrics([traj])["invalid_rate"] == 2 / 3


def test_budget_cuts_running_episodes_and_drops_unstarted_ones():
    env = LetterEnv(batch_size=[2], max_steps=10)
    ended = []
    episodes, steps = run_episodes(
        env, _actor(env, {0: 5, 1: 5, 2: 1}, []), [0, 1, 2], max_transitions=5, on_end=ended.append
    )
    assert steps == 4  # two steps of two slots; a third would pass the budget of 5
    assert [e.episode_id for e in episodes] == [0, 1] and [e.episode_id for e in ended] == [0, 1]
    assert all(e.truncated and not e.terminated and len(e.actions) == 2 for e in episodes)


def test_stop_cuts_running_episodes_like_a_budget():
    env = LetterEnv(batch_size=[2], max_steps=10)
    asked = []

    def stop():  # "out of time" from the third question on (before the third step)
        asked.append(1)
        return len(asked) > 2

    episodes, steps = run_episodes(env, _actor(env, {0: 5, 1: 5, 2: 1}, []), [0, 1, 2], stop=stop)
    assert steps == 4 and [e.episode_id for e in episodes] == [0, 1]
    assert all(e.truncated and not e.terminated and len(e.actions) == 2 for e in episodes)


def test_on_step_runs_while_the_step_info_describes_the_step_and_groups_share_a_task():
    env = LetterEnv(batch_size=[3], max_steps=2)
    seen = []
    episodes, _ = run_episodes(
        env,
        lambda slots, eps: ["x"] * len(slots),  # never the letter: every episode hits the step limit
        [4, 6],
        group_size=2,
        on_step=lambda slot, ep: seen.append((slot, ep.episode_id, len(ep.actions))),
    )
    assert [(e.episode_id, e.task_index, e.group_id) for e in episodes] == [
        (0, 4, 0),
        (1, 4, 0),
        (2, 6, 1),
        (3, 6, 1),
    ]
    assert all(e.truncated and not e.terminated for e in episodes)
    assert seen[:3] == [(0, 0, 1), (1, 1, 1), (2, 2, 1)] and len(seen) == 8


def test_what_an_actor_records_travels_with_its_step():
    env = LetterEnv(batch_size=[2], max_steps=10)
    inner = _actor(env, {0: 1, 1: 3, 2: 2}, [])

    def act(slots, episodes):
        actions = inner(slots, episodes)
        for ep, a in zip(episodes, actions, strict=True):
            ep.record_generated((ep.episode_id, len(ep.actions), a))
        return actions

    episodes, _ = run_episodes(env, act, [0, 1, 2])  # two waves, slots refilled: ids must not mix
    for ep in episodes:
        assert ep.generated == [(ep.episode_id, t, a) for t, a in enumerate(ep.actions)]
    fresh = Episode(episode_id=7, task_index=0, group_id=0)
    fresh.record_generated("turn 0")
    with pytest.raises(RuntimeError, match="once per act call"):
        fresh.record_generated("a second record of turn 0")


def test_replay_applies_the_recorded_actions_until_the_env_ends_the_episode():
    env = LetterEnv(batch_size=[1], max_steps=3)  # task 1: the letter "a"
    seen = []
    won = replay_actions(env, 1, ["", "zzz", "cat", "dog"], on_step=lambda i, e: seen.append(i))
    assert (won.steps, won.reward, won.success, won.terminated, won.score) == (3, 1.0, True, True, 1.0)
    assert won.states == ["empty page", "you said zzz", "you said cat"] and seen == [0, 1, 2]
    cut = replay_actions(env, 1, ["x", "y"])  # the actions run out before the episode ends
    assert (cut.steps, cut.success, cut.terminated) == (2, False, False)
    limit = replay_actions(env, 1, ["x", "y", "z", "cat"])  # truncated at max_steps: "cat" is never said
    assert (limit.steps, limit.success, limit.terminated) == (3, False, False)
    assert replay_actions(env, 1, []).steps == 0  # a reset only
    with pytest.raises(ValueError, match="batch size 1"):
        replay_actions(LetterEnv(batch_size=[2]), 1, ["a"])
