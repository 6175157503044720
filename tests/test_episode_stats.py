"""``scripts/episode_stats.py``: verbs, repeated actions, wins per type and the comparison with a reference."""

import pytest

from dreamgym.schema import Trajectory, Transition, write_trajectories
from tests.script_loader import load_script

stats = load_script("episode_stats")


def _episode(task_id: str, actions: list[str], won: bool) -> Trajectory:
    steps = [
        Transition(
            task_id=task_id, instruction="put a mug in desk", step=i, state="s", action=a, next_state="s",
            reward=float(won and i == len(actions) - 1), done=i == len(actions) - 1,
            success=won and i == len(actions) - 1, env="alfworld", split="test",
        )
        for i, a in enumerate(actions)
    ]  # fmt: skip
    return Trajectory(
        trajectory_id=task_id, task_id=task_id, instruction="put a mug in desk", env="alfworld",
        split="test", source="real", policy="policy", transitions=steps, success=won,
    )  # fmt: skip


def test_counts_repeats_verbs_types_and_the_split_against_the_reference(tmp_path):
    a, b, c = (f"alfworld/valid_unseen/{t}/game-{i}" for i, t in enumerate(["pick", "pick", "look"]))
    walk = ["go to drawer 1", "go to drawer 2", "go to drawer 1", "go to drawer 2"]  # two repeats
    win = ["go to shelf 1", "take mug 1 from shelf 1", "go to desk 1", "move mug 1 to desk 1"]
    ref, src = tmp_path / "ref.jsonl", tmp_path / "src.jsonl"
    write_trajectories(ref, [_episode(a, win, True), _episode(b, win, True), _episode(c, walk, False)])
    write_trajectories(src, [_episode(a, walk, False), _episode(b, win, True), _episode(c, win, True)])

    result = stats.main(
        ["--reference", f"warm={ref}", "--source", f"rl={src}", "--out", str(tmp_path / "o.json")]
    )

    rl = result["rl"]
    assert (rl["episodes"], rl["wins"], rl["steps"]) == (3, 2, 12)
    assert rl["repeat_rate"] == round(2 / 12, 3)
    assert rl["repeat_rate_by_verb"]["go"] == round(2 / 8, 3)
    assert rl["per_episode"]["go"] == round(8 / 3, 2) and rl["verbs"]["take"] == round(2 / 12, 3)
    assert rl["by_type"] == {"look": "1 of 1", "pick": "1 of 2"}
    assert rl["vs_reference"] == {"tasks": 3, "gained": 1, "lost": 1, "p_two_sided": 1.0}
    assert "vs_reference" not in result["warm"] and result["warm"]["wins"] == 2
    assert (tmp_path / "o.json").exists()


def test_a_source_without_a_name_is_one_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="NAME=path"):
        stats.main(["--source", str(tmp_path / "x.jsonl")])
