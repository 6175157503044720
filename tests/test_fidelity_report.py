"""The fidelity report: per-source rows that tell a faithful experience model from one that calls
every purchase a success."""

import importlib.util
from pathlib import Path

from dreamgym.collect import collect_trajectories
from dreamgym.modeling.formats import ParsedOutcome

_SPEC = importlib.util.spec_from_file_location(
    "fidelity_report", Path(__file__).resolve().parents[1] / "scripts" / "fidelity_report.py"
)
fidelity_report = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fidelity_report)


class _Answers:
    """Answers from the recorded real transitions; ``buy_success`` overrides every purchase's reward."""

    def __init__(self, trajs, buy_success=None):
        self.table = {(q.state, q.action): q for t in trajs for q in t.transitions}
        self.buy_success = buy_success

    def predict(self, queries):
        out = []
        for q in queries:
            t = self.table[(q.state, q.action)]
            reward = t.reward
            if self.buy_success is not None and t.terminated:
                reward = float(self.buy_success)
            out.append(ParsedOutcome(True, t.next_state, reward, t.terminated, reward))
        return out


def test_report_rows_per_source_and_markdown():
    sources = {
        name: collect_trajectories(
            "webshop", "test", 0, 0, mix={name: 8}, seed=1, teacher=False, batch_size=4
        )
        for name in ("non_oracle", "near_miss")
    }
    trajs = [t for ts in sources.values() for t in ts]
    faithful = fidelity_report.report(_Answers(trajs), sources, steps_trajectories=2, open_loop=3)
    assert set(faithful) == {"non_oracle", "near_miss"}
    for row in faithful.values():
        assert row["success_precision"] == 1.0 and row["reward_acc"] == 1.0 and row["n"] == 8
        assert row["open_loop"]["open_loop_reward_acc"] == 1.0 and row["steps"]["state_token_f1"] == 1.0
    yes_man = fidelity_report.report(
        _Answers(trajs, buy_success=True), sources, steps_trajectories=0, open_loop=0
    )
    for name, row in yes_man.items():
        real = sum(t.success for t in sources[name]) / 8
        assert row["success_recall"] == 1.0 and row["success_precision"] == real < 1.0
    md = fidelity_report.markdown({"_meta": {"command": "x", "commit": "abc"}, **faithful})
    assert md.splitlines()[2].startswith("| non_oracle | 8 |")
