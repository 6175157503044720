"""The policy-gradient core makes a policy better where the answer is known (the probe envs), and the
check that says so fails on a deliberately broken core (scripts/learning_check.py runs the full sizes)."""

import re

import pytest
from script_loader import load_script

from dreamgym.envs import make_env
from dreamgym.envs.episodes import run_episodes
from dreamgym.envs.probes import _draw

lc = load_script("learning_check")


def _play(env, choose):
    def act(slots, episodes):
        return [choose(e) for e in episodes]

    return run_episodes(env, act, list(range(8)), group_size=1)[0]


def _named(ep):
    """The option the instruction names, among the listed actions of the episode's current state."""
    word = re.search(r"the (\w+) (?:label|door)", ep.instruction).group(1)
    return next((a for a in ep.available[-1] if word in a), ep.available[-1][0])


@pytest.mark.parametrize("name", ["probe_choice", "probe_credit"])
def test_probe_rewards_exactly_the_named_option(name):
    env = make_env(name, batch_size=[4], split="val")
    right = _play(env, _named)
    assert all(e.success and e.rewards[-1] == 1.0 and sum(e.rewards) == 1.0 for e in right)
    wrong = _play(
        env, lambda e: next(a for a in e.available[-1] if a != _named(e) or len(e.available[-1]) == 1)
    )
    assert not any(e.success for e in wrong) and all(sum(e.rewards) == 0.0 for e in wrong)
    if name == "probe_credit":  # reward only at the end: the choice, two walks, the door
        assert all(len(e.actions) == 4 and e.rewards[:-1] == [0.0, 0.0, 0.0] for e in right)


def test_probe_splits_are_fixed_and_differ():
    a, b = make_env("probe_choice", split="train"), make_env("probe_choice", split="train")
    seen = []
    for env in (a, b):
        env.queue_tasks([5])
        td = env.reset()
        seen.append((td["instruction"], td["observation"]))
    assert seen[0] == seen[1]
    train = [_draw("probe_choice", "train", i, 4) for i in range(50)]
    test = [_draw("probe_choice", "test", i, 4) for i in range(50)]
    assert train != test


def test_probe_flags_an_unlisted_action_invalid():
    env = make_env("probe_credit", batch_size=[1])
    ep = _play(env, lambda e: "open door" if len(e.actions) == 0 else e.available[-1][0])[0]
    assert ep.invalid[0] and ep.states[1] == ep.states[0]


@pytest.mark.slow
def test_grpo_learns_the_choice_probe_and_a_broken_core_does_not(tmp_path):
    """GRPO from a fresh tiny policy (chance 0.25) reaches >= 0.9 held-out greedy success on the one-step
    probe; the same run with the advantage's sign flipped ends below chance."""
    tok = lc.probe_tokenizer(tmp_path / "tok")
    kw = dict(
        tokenizer_dir=tok, iterations=80, tasks=16, group=8, val_every=80, val_tasks=64, root=str(tmp_path)
    )
    good = lc.run_check("probe_choice", "grpo", **kw)
    assert good["first"] < 0.45, good  # it starts near chance
    assert good["final"] >= 0.9, good
    broken = lc.run_check("probe_choice", "grpo", bug="advantage_sign", **kw)
    assert broken["final"] < 0.25, broken
