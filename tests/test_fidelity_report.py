"""The fidelity report: per-source rows that tell a faithful experience model from one that calls
every purchase a success."""

from experience_toy import RecordedAnswers
from script_loader import load_script

from dreamgym.collect import collect_trajectories

fidelity_report = load_script("fidelity_report")


def test_report_rows_per_source_and_markdown():
    sources = {
        name: collect_trajectories(
            "webshop", "test", 0, 0, mix={name: 8}, seed=1, teacher=False, batch_size=4
        )
        for name in ("non_oracle", "near_miss")
    }
    trajs = [t for ts in sources.values() for t in ts]
    faithful = fidelity_report.report(RecordedAnswers(trajs), sources, steps_trajectories=2, open_loop=3)
    assert set(faithful) == {"non_oracle", "near_miss"}
    for row in faithful.values():
        assert row["success_precision"] == 1.0 and row["reward_acc"] == 1.0 and row["n"] == 8
        assert row["open_loop"]["open_loop_reward_acc"] == 1.0 and row["steps"]["state_token_f1"] == 1.0
    yes_man = fidelity_report.report(
        RecordedAnswers(trajs, buy_success=True), sources, steps_trajectories=0, open_loop=0,
        decisive_verbs=["click[buy"],
    )  # fmt: skip
    for name, row in yes_man.items():
        real = sum(t.success for t in sources[name]) / 8
        assert row["success_recall"] == 1.0 and row["success_precision"] == real < 1.0
        buys = [tr for t in sources[name] for tr in t.transitions if tr.action.startswith("click[buy ")]
        assert (
            row["decisive"]["n"] == len(buys) > 0 and row["decisive"]["success_fpr"] == 1.0
        )  # every failed buy
    md = fidelity_report.markdown({"_meta": {"command": "x", "commit": "abc"}, **faithful})
    assert md.splitlines()[2].startswith("| non_oracle | 8 |")
