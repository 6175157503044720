"""The main job's wall-clock budget: fit stages get a ``--trainer.max_time`` from what is left."""

import pytest
import yaml

import dreamgym.lightning_cli
from dreamgym.lab.pipeline import parse_pipeline_config
from dreamgym.lab.stages import TimeBudget, _max_time_minutes, fit_stage


def _at(budget: TimeBudget, minutes: float) -> float:
    """The monotonic time ``minutes`` after the budget was made."""
    return budget.deadline - budget.minutes * 60 + minutes * 60


def test_allot_shares_what_is_left_and_hands_on_unused_time():
    b = TimeBudget(60, {"a": 1.0, "b": 1.0, "c": 2.0}, reserve_minutes=10)
    assert b.allot("a", now=_at(b, 0)) == ["--trainer.max_time=00:00:12:30"]  # 50 min x 1/4
    b.skip("b")  # its output exists: its share goes to c
    assert b.allot("c", now=_at(b, 5)) == [
        "--trainer.max_time=00:00:45:00"
    ]  # a used 5 of its 12.5: c gets all 45
    assert b.given == {"a": 12.5, "c": 45.0}
    assert b.allot("not_budgeted") == []


def test_allot_never_raises_a_stage_cap_and_gives_a_late_stage_its_minimum():
    b = TimeBudget(30, {"a": 1.0, "b": 1.0}, reserve_minutes=5, min_minutes=2)
    assert b.allot("a", now=_at(b, 0), cap=10) == [
        "--trainer.max_time=00:00:10:00"
    ]  # 12.5 allotted, capped at 10
    assert b.allot("b", now=_at(b, 29)) == ["--trainer.max_time=00:00:02:00"]  # nothing left: the minimum
    assert "30 min in all" in b.plan() and "a 50%" in b.plan()
    with pytest.raises(ValueError, match="shares"):
        TimeBudget(30, {})
    with pytest.raises(ValueError, match="minutes"):
        TimeBudget(0, {"a": 1.0})


def test_max_time_parsing():
    assert _max_time_minutes(["--x=1", "--trainer.max_time=00:01:10:30"]) == 70.5
    assert _max_time_minutes(["--x=1"]) is None
    with pytest.raises(ValueError, match="DD:HH:MM:SS"):
        _max_time_minutes(["--trainer.max_time=10:00"])


def test_fit_stage_gets_its_max_time_last_and_resume_ignores_it(tmp_path, monkeypatch):
    calls = []

    def fake_cli(argv):
        calls.append(argv)
        export = yaml.safe_load(open(argv[-1]))["model"]["init_args"][
            "save_dir"
        ]  # the last piece: the export
        (tmp_path / "runs" / "policy_sft" / "version_0" / "checkpoints").mkdir(parents=True, exist_ok=True)
        (tmp_path / "runs" / "policy_sft" / "version_0" / "checkpoints" / "last.ckpt").write_text("x")
        if len(calls) > 1:  # the first fit is "interrupted" (no export), the second finishes
            __import__("os").makedirs(export)

    monkeypatch.setattr(dreamgym.lightning_cli, "main", fake_cli)
    out = tmp_path / "policy_sft"
    args = ["--trainer.max_steps=400", "--trainer.max_time=00:00:10:00"]
    with pytest.raises(RuntimeError, match="without writing"):
        fit_stage("c.yaml", args, out, "model.init_args.save_dir", budget=TimeBudget(60, {"policy_sft": 1.0}))
    assert (
        calls[0][calls[0].index("--trainer.max_steps=400") + 2] == "--trainer.max_time=00:00:10:00"
    )  # capped
    # a rerun with another budget (another max_time) still resumes the interrupted fit
    fit_stage("c.yaml", args, out, "model.init_args.save_dir", budget=TimeBudget(5, {"policy_sft": 1.0}, 1))
    assert "--ckpt_path=last" in calls[1]
    assert {"--trainer.max_time=00:00:04:00", "--trainer.max_time=00:00:03:59"} & set(
        calls[1]
    )  # 5 - 1 reserved
    assert out.exists()
    # an existing output gives its share away
    b = TimeBudget(60, {"policy_sft": 1.0, "policy_rl": 1.0}, reserve_minutes=0)
    fit_stage("c.yaml", args, out, "model.init_args.save_dir", budget=b)
    assert b.open == {"policy_rl"} and len(calls) == 2


def test_pipeline_config_budget_is_off_unless_asked():
    assert parse_pipeline_config(["--config", "configs/pipeline_webshop_long.yaml"]).time_budget() is None
    cfg = parse_pipeline_config(
        ["--config", "configs/pipeline_webshop_long.yaml", "--time_budget_minutes=50"]
    )
    budget = cfg.time_budget()
    assert budget.minutes == 50 and set(budget.shares) >= {"experience_model", "policy_sft", "policy_rl"}


def test_episode_stages_get_their_share_of_the_reserve():
    """The reserve bounds the on-policy episodes and the warm start's evaluation; the RL evaluation plays the
    warm start's tasks uncapped so the two stay paired."""
    b = TimeBudget(50, {"policy_sft": 1.0}, reserve_minutes=14)
    assert b.episode_minutes("evaluate_policy_sft") == pytest.approx(4.2)
    assert b.episode_minutes("onpolicy_rollouts") == pytest.approx(3.5)
    assert b.episode_minutes("fidelity_onpolicy") == pytest.approx(1.4)
    assert b.episode_minutes("evaluate_policy_rl") is None
    assert TimeBudget(50, {"policy_sft": 1.0}, reserve_minutes=0).episode_minutes("onpolicy_rollouts") == 1.0
