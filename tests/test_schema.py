"""The transition schema and its JSONL reader/writer."""

import json

import pytest

from dreamgym.schema import (
    Trajectory,
    TrajectoryFileError,
    TrajectoryWriter,
    Transition,
    iter_transitions,
    read_trajectories,
)


def _traj(tid="t0", n=2, success=True) -> Trajectory:
    steps = [
        Transition(
            task_id="webshop/train/1",
            instruction="buy red shoes",
            step=i,
            state=f"s{i}",
            action=f"a{i}",
            next_state=f"s{i + 1}",
            reward=1.0 if (success and i == n - 1) else 0.0,
            done=i == n - 1,
            success=success and i == n - 1,
            available_actions=["click[x]"],
            reasoning="because",
            trajectory_id=tid,
        )
        for i in range(n)
    ]
    return Trajectory(
        tid, "webshop/train/1", "buy red shoes", "webshop", "train", "offline", "expert", steps, success, 1.0
    )


def test_round_trip(tmp_path):
    p = tmp_path / "d.jsonl"
    with TrajectoryWriter(p) as w:
        w.write(_traj("a"))
        w.write(_traj("b", n=3, success=False))
    with TrajectoryWriter(p) as w:  # append-only: a second writer adds, never truncates
        w.write(_traj("c", n=1))
    back = list(read_trajectories(p))
    assert [t.trajectory_id for t in back] == ["a", "b", "c"]
    assert back[0] == _traj("a")
    assert len(list(iter_transitions(back))) == 6


def test_bad_json_names_file_and_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps(_traj().to_dict()) + "\n{not json\n")
    it = read_trajectories(p)
    next(it)
    with pytest.raises(TrajectoryFileError, match=r"d\.jsonl:2: not valid JSON"):
        next(it)


@pytest.mark.parametrize(
    "mutate, msg",
    [
        (
            lambda d: d["transitions"][1].__setitem__("reward", "high"),
            r":1, transitions\[1\]: field 'reward' must be",
        ),
        (lambda d: d["transitions"][0].pop("action"), r"missing required field 'action'"),
        (lambda d: d.__setitem__("split", "dev"), r"field 'split' is 'dev'; use one of"),
        (lambda d: d["transitions"][0].__setitem__("done", 1), r"field 'done' must be bool, got int"),
        (lambda d: d["transitions"][1].__setitem__("step", 5), r"field 'step' is 5, expected 1"),
        (lambda d: d.__setitem__("colour", "red"), r"unknown field\(s\) \['colour'\]"),
    ],
)
def test_schema_errors_name_the_field(tmp_path, mutate, msg):
    d = _traj().to_dict()
    mutate(d)
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(d) + "\n")
    with pytest.raises(TrajectoryFileError, match=msg):
        list(read_trajectories(p))


def test_writer_refuses_bad_records(tmp_path):
    t = _traj()
    t.transitions[0].source = "made-up"
    p = tmp_path / "d.jsonl"
    with TrajectoryWriter(p) as w, pytest.raises(TrajectoryFileError, match="source"):
        w.write(t)
    assert p.read_text() == ""  # nothing half-written


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dreamgym collect .*nope\.jsonl"):
        list(read_trajectories(tmp_path / "nope.jsonl"))
