"""Offline collection: valid JSONL, teacher rationales, available actions recoverable from states."""

import pytest

from dreamgym.collect import collect_trajectories, main
from dreamgym.envs import WebShopEnv
from dreamgym.schema import read_trajectories


def test_collect_writes_readable_jsonl(webshop_offline):
    trajs = list(read_trajectories(webshop_offline))
    assert len(trajs) == 32
    assert sum(t.policy == "expert" for t in trajs) == 24
    for t in trajs:
        assert t.split == "train" and t.env == "webshop" and t.source == "real"
        assert [tr.step for tr in t.transitions] == list(range(len(t.transitions)))
        last = t.transitions[-1]
        assert last.done and (last.terminated or last.truncated) and not (last.terminated and last.truncated)
        assert all(not tr.done for tr in t.transitions[:-1])
        assert t.success == last.success and t.score == last.score
        assert all(tr.reasoning and tr.available_actions for tr in t.transitions)
        for a, b in zip(t.transitions, t.transitions[1:], strict=False):
            assert a.next_state == b.state
    experts = [t for t in trajs if t.policy == "expert"]
    assert sum(t.success for t in experts) / len(experts) >= 0.9
    assert all(
        tr.reward == (1.0 if tr.score == 1.0 and tr.terminated else 0.0)
        for t in trajs
        for tr in t.transitions
    )


def test_infer_available_actions_matches_env_on_collected_states(webshop_offline):
    n = 0
    for t in read_trajectories(webshop_offline):
        for tr in t.transitions:
            assert WebShopEnv.infer_available_actions(tr.instruction, tr.state) == tr.available_actions
            n += 1
    assert n > 100


def test_collect_returns_and_appends(tmp_path):
    out = tmp_path / "x.jsonl"
    a = collect_trajectories(
        "webshop", "val", n_expert=2, n_random=3, out=out, seed=3, batch_size=2, max_steps=6, teacher=False
    )
    b = collect_trajectories(
        "webshop", "val", n_expert=2, n_random=3, out=out, seed=3, batch_size=4, max_steps=6, teacher=False
    )
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]  # seeded and independent of batch size
    assert len(list(read_trajectories(out))) == 10
    assert all(tr.reasoning is None for t in a for tr in t.transitions)
    assert all(len(t.transitions) <= 6 for t in a)


def test_collect_errors_and_cli(tmp_path, capsys):
    with pytest.raises(ValueError, match="positive sum"):
        collect_trajectories("webshop", "train", 0, 0)
    out = tmp_path / "cli.jsonl"
    main(
        [
            "--env",
            "webshop",
            "--split",
            "test",
            "--n-expert",
            "2",
            "--n-random",
            "1",
            "--out",
            str(out),
            "--batch-size",
            "2",
        ]
    )
    assert "wrote 3 trajectories" in capsys.readouterr().out
    assert len(list(read_trajectories(out))) == 3
    args = ["--split", "test", "--n-expert", "1", "--n-random", "0", "--out", str(out), "--batch-size", "1"]
    with pytest.raises(SystemExit) as e:  # an existing file is neither appended to nor replaced silently
        main(args)
    assert e.value.code == 2 and "exists; pass --append" in capsys.readouterr().err
    assert len(list(read_trajectories(out))) == 3
    main([*args, "--append"])
    assert len(list(read_trajectories(out))) == 4
    main([*args, "--overwrite"])
    assert len(list(read_trajectories(out))) == 1
