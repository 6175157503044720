"""Scripted policies: the visible-text heuristic, the near-miss oracle, the policy registry and mixes."""

from collections import Counter
from types import SimpleNamespace

import pytest
from tensordict import TensorDict

from dreamgym.agents import RandomAgent, agent_names, make_agent, make_expert
from dreamgym.collect import collect_trajectories, main
from dreamgym.envs import WebShopEnv
from dreamgym.envs.alfworld.searcher import ALFWorldSearcher
from dreamgym.envs.webshop.agents import NEAR_MISS_MODES, NearMissAgent, VisibleTextAgent, WebShopExpert
from dreamgym.schema import read_trajectories


class _NoInfo:
    """Stands in for the privileged info; any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the agent read info.{name}")

    def __getitem__(self, key):
        raise AssertionError(f"the agent read info[{key!r}]")

    def __contains__(self, key):
        raise AssertionError(f"the agent asked {key!r} in info")

    def __bool__(self):
        raise AssertionError("the agent tested info")

    def __iter__(self):
        raise AssertionError("the agent iterated info")


@pytest.fixture(scope="module")
def env():
    return WebShopEnv(batch_size=[1], split="train")


def _play(env, agent, task, seed, info=True, limit=15):
    """One episode on ``task``; returns (bought, success, the last step info)."""
    env.queue_tasks([task])
    env.reset()
    agent.reset(seed)
    td = None
    for _ in range(limit):
        step_info = env.step_info(0) if info is True else info
        td = TensorDict({"action": [agent.act(env.current(0), step_info)]}, batch_size=[1])
        td = env.step(td)["next"]
        if td["done"].item():
            break
    return bool(td["terminated"].item()), bool(td["success"].item()), env.step_info(0)


@pytest.mark.parametrize("kind", ["none", "raising"])
def test_visible_text_agent_never_reads_info(env, kind):
    agent, info = VisibleTextAgent(), None if kind == "none" else _NoInfo()
    results = [_play(env, agent, task, seed=task, info=info) for task in range(0, 60, 10)]
    assert all(bought for bought, _, _ in results)
    assert any(ok for _, ok, _ in results)


def test_visible_text_agent_beats_random(env):
    tasks = range(0, 2400, 150)
    heuristic = sum(_play(env, VisibleTextAgent(), t, seed=t, info=None)[1] for t in tasks)
    rand = sum(_play(env, RandomAgent(), t, seed=t)[1] for t in tasks)
    assert heuristic > rand and heuristic >= len(tasks) // 4


def test_near_miss_purchases_fail(env):
    agent = NearMissAgent()
    results = [_play(env, agent, task, seed=task) for task in range(0, 2000, 100)]
    assert all(bought for bought, _, _ in results)
    assert sum(not ok for _, ok, _ in results) >= 0.9 * len(results)


def _committed(mode, info):
    """Whether the final step ``info`` shows ``mode``'s mistake."""
    r, target = info["reward_info"], info["goal"]["asin"]
    if mode == "over_price":
        return not r["price_ok"] and info["asin"] != target
    if mode == "too_early":
        return info["asin"] == target and not info["options"]
    if mode == "wrong_option":
        return info["asin"] == target and bool(r["options_missed"])
    return info["asin"] != target and bool(r["attrs_missed"] or r["options_missed"])


@pytest.mark.parametrize("mode", NEAR_MISS_MODES)
def test_near_miss_forced_mode_commits_its_mistake(env, mode):
    agent = NearMissAgent(modes=(mode,))
    committed = 0
    for task in range(0, 1200, 100):
        bought, ok, info = _play(env, agent, task, seed=task)
        assert bought
        if agent.mode == mode:
            assert _committed(mode, info) and not ok
            committed += 1
    assert committed >= 3


def test_near_miss_is_an_expert_and_checks_modes():
    assert isinstance(NearMissAgent(), WebShopExpert)
    with pytest.raises(ValueError, match="subset"):
        NearMissAgent(modes=("typo",))
    with pytest.raises(ValueError, match="subset"):
        NearMissAgent(modes=())


def test_agent_registry():
    assert agent_names("webshop") == ["expert", "near_miss", "non_oracle", "random", "random_queries"]
    assert agent_names("alfworld") == ["expert", "near_miss", "non_oracle", "random", "random_queries"]
    assert isinstance(make_agent("non_oracle", "alfworld"), ALFWorldSearcher)
    assert make_agent("near_miss", "alfworld", seed=1, modes=("skip_step",)).mode == "skip_step"
    assert isinstance(make_agent("non_oracle", "webshop", seed=1), VisibleTextAgent)
    assert isinstance(make_agent("near_miss", "webshop", seed=1, modes=("too_early",)), NearMissAgent)
    assert isinstance(make_agent("random", "alfworld", seed=1), RandomAgent)
    assert type(make_agent("expert", "webshop")) is type(make_expert("webshop")) is WebShopExpert
    with pytest.raises(KeyError, match="near_miss"):
        make_agent("nope", "webshop")


def test_random_queries_draw_instruction_words_anywhere():
    """``random`` searches a run of consecutive instruction words; ``random_queries`` any of them, in any
    order, so it reaches results pages ``random`` never does (the 1M distinct-transition retrieval data)."""
    obs = SimpleNamespace(
        instruction="i need a red cotton shirt for men, and price lower than 40.00 dollars",
        available_actions=["search[<query>]"],
    )
    words = ["i", "need", "a", "red", "cotton", "shirt", "for", "men"]
    spans = {" ".join(words[i : i + k]) for k in range(2, 6) for i in range(len(words) - k + 1)}

    def queries(name: str) -> set[str]:
        agent = make_agent(name, "webshop", seed=0)
        return {agent.act(obs, {})[len("search[") : -1] for _ in range(300)}

    assert queries("random") <= spans
    anywhere = queries("random_queries")
    assert anywhere - spans and all(set(q.split()) <= set(words) for q in anywhere)
    with pytest.raises(ValueError, match="query='typo'"):
        RandomAgent(query="typo")


def test_collect_with_mix(tmp_path):
    out = tmp_path / "mix.jsonl"
    mix = {"non_oracle": 3, "near_miss": 3, "expert": 1}
    trajs = collect_trajectories(
        "webshop", "train", 1, 1, out=out, teacher=False, batch_size=4, max_steps=10, mix=mix
    )
    counts = Counter(t.policy for t in read_trajectories(out))
    assert counts == {"expert": 2, "random": 1, "non_oracle": 3, "near_miss": 3}
    assert len({t.trajectory_id for t in trajs}) == len(trajs) == 9
    assert all(t.trajectory_id.split("-")[-2] == t.policy for t in trajs)
    assert not any(t.success for t in trajs if t.policy == "near_miss")
    with pytest.raises(ValueError, match="no policies"):
        collect_trajectories("webshop", "train", 0, 0, mix={"oracle": 2})
    with pytest.raises(ValueError, match="positive sum"):
        collect_trajectories("webshop", "train", 0, 0, mix={"near_miss": 0})


def test_collect_cli_lists_every_policy(tmp_path, capsys):
    out = tmp_path / "cli.jsonl"
    args = ["--split", "val", "--n-expert", "1", "--n-random", "0", "--n-non-oracle", "2"]
    main(args + ["--n-near-miss", "1", "--out", str(out), "--batch-size", "4", "--no-teacher"])
    printed = capsys.readouterr().out
    assert all(f"{p}: " in printed for p in ("expert", "non_oracle", "near_miss"))
    assert "random: " not in printed and "wrote 4 trajectories" in printed
    main([*args[:6], "--mix", '{"random_queries": 2}', "--out", str(out), "--overwrite", "--no-teacher"])
    assert "random_queries: 2 episodes" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*args, "--mix", '{"random_queries": -1}', "--out", str(out), "--overwrite"])
    assert "--mix must be a JSON object of policy name -> episodes" in capsys.readouterr().err
