"""Fidelity metrics: token F1 by hand, meter counts (parse failures count as wrong), open-loop replay."""

import pytest
from experience_toy import toy_trajectories

from dreamgym.fidelity import FidelityMeter, open_loop_eval, teacher_forced_eval, token_f1
from dreamgym.modeling.formats import ParsedOutcome


def test_token_f1_by_hand():
    assert token_f1("a b c", "a b d e") == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("A a", "a a") == 1.0


def test_meter_counts_and_copy_baseline():
    m = FidelityMeter()
    m.update(ParsedOutcome(True, "s1 x", 1.0, True, 1.0), "s0", "s1  x", 1.0, True)  # all right, success
    m.update(ParsedOutcome(True, "s2", 1.0, False), "s1", "s3", 0.0, False)  # false success, wrong state
    m.update(
        ParsedOutcome(False, error="no <end>"), "s3", "s3", 0.0, False
    )  # parse failure: wrong everywhere
    m.update(ParsedOutcome(True, "s4", 0.0, True), "s4", "s5", 1.0, True)  # missed success
    out = m.compute()
    assert out["n"] == 4 and out["parse_fail_rate"] == 0.25
    assert out["reward_acc"] == 0.25 and out["done_acc"] == 0.75 and out["state_exact"] == 0.25
    assert out["success_precision"] == 0.5 and out["success_recall"] == 0.5 and out["success_f1"] == 0.5
    assert out["success_fpr"] == 0.5  # 1 of the 2 real non-successes called a success
    assert out["copy_state_token_f1"] == pytest.approx(1 / 4)  # only "s3" -> "s3" copies right
    m.reset()
    assert m.compute()["n"] == 0


class _Oracle:
    """Answers from the real trajectories (perfect model) or always fails to parse."""

    def __init__(self, trajs, broken=False):
        self.table = {(t.state, t.action): t for tr in trajs for t in tr.transitions}
        self.broken, self.calls = broken, 0

    def predict(self, queries):
        self.calls += 1
        if self.broken:
            return [ParsedOutcome(False, error="x") for _ in queries]
        out = []
        for q in queries:
            t = self.table[(q.state, q.action)]
            out.append(ParsedOutcome(True, t.next_state, t.reward, t.done, t.score))
        return out


def test_open_loop_perfect_and_broken_models():
    trajs = toy_trajectories(5, "test", 3)
    good = open_loop_eval(_Oracle(trajs), trajs)
    assert good["open_loop_reward_acc"] == 1.0 and good["open_loop_state_token_f1"] == 1.0 and good["n"] == 5
    oracle = _Oracle(trajs)
    open_loop_eval(oracle, trajs)
    assert oracle.calls == 3  # all trajectories advance together: one batched call per step
    bad = open_loop_eval(_Oracle(trajs, broken=True), trajs)
    successes = sum(t.success for t in trajs)
    assert bad["open_loop_parse_fail_rate"] == 1.0
    assert bad["open_loop_reward_acc"] == pytest.approx(
        1 - successes / 5
    )  # final reward 0 is right only on failures


class _Optimist(_Oracle):
    """Right about every state, but calls every final step a success (the failure mode RL exploits)."""

    def predict(self, queries):
        out = super().predict(queries)
        for q, o in zip(queries, out, strict=True):
            if self.table[(q.state, q.action)].done:
                o.reward = 1.0
        return out


def test_teacher_forced_eval_all_steps_and_final_steps_only():
    trajs = toy_trajectories(10, "test", 5)
    successes = sum(t.success for t in trajs)
    assert 0 < successes < 10
    good = teacher_forced_eval(_Oracle(trajs), trajs)
    assert good["n"] == 30 and good["reward_acc"] == 1.0 and good["success_f1"] == 1.0
    final = teacher_forced_eval(_Optimist(trajs), trajs, done_only=True)
    assert final["n"] == 10  # one final step per episode
    assert final["success_precision"] == pytest.approx(successes / 10) and final["success_recall"] == 1.0
    assert final["reward_acc"] == pytest.approx(successes / 10)
    # history given to the model: the episode's earlier actions
    seen = []

    class _Spy(_Oracle):
        def predict(self, queries):
            seen.extend(q.history for q in queries)
            return super().predict(queries)

    teacher_forced_eval(_Spy(trajs[:1]), trajs[:1], done_only=True)
    assert seen == [[a.action for a in trajs[0].transitions[:2]]]


def test_teacher_forced_eval_under_a_time_cap_asks_the_first_chunks_only():
    trajs = toy_trajectories(10, "test", 5)
    oracle = _Oracle(trajs)
    capped = teacher_forced_eval(oracle, trajs, max_minutes=0.0, chunk=4)  # the first chunk always runs
    assert capped["n"] == 4 and capped["reward_acc"] == 1.0 and oracle.calls == 1
    assert teacher_forced_eval(_Oracle(trajs), trajs, max_minutes=60.0, chunk=4)["n"] == 30
