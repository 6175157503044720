"""The purchase diagnosis: a model that writes the teacher's rationale gets every check right; one that
calls every check passing has its false positives traced to the wrong check, and the parser reads back
what the teacher writes."""

import re

from experience_toy import RecordedAnswers
from script_loader import load_script

from dreamgym.collect import collect_trajectories
from dreamgym.teachers.webshop import parse_purchase_checks

diagnose_purchases = load_script("diagnose_purchases")


def _yes_man(text: str) -> str:
    """Every check passes and the reward is 1 (the terms and numbers are kept)."""
    text = re.sub(r"'([^']+)' not on the page no", r"'\1' in attributes yes", text)
    text = text.replace("not selected no", "selected yes").replace(" > $", " <= $")
    text = re.sub(r"(price \S+ <= \S+) no", r"\1 yes", text)
    text = re.sub(
        r"type: not the goal's kind of product no \(type factor [\d.]+\)", "type: the goal's kind yes", text
    )
    return text.replace("the reward is 0.", "the reward is 1.")


def test_parser_reads_back_every_teacher_purchase():
    trajs = collect_trajectories(
        "webshop", "test", 0, 0, mix={"non_oracle": 12, "near_miss": 12}, seed=3, batch_size=4
    )
    buys = [tr for t in trajs for tr in t.transitions if tr.terminated]
    for tr in buys:
        c = parse_purchase_checks(tr.reasoning)
        assert c is not None and c.reward == int(tr.success) == c.derived_reward
        n_checks = 1 + len(c.attributes) + len(c.options)
        assert f"/{n_checks} checks pass" in tr.reasoning
    assert parse_purchase_checks("Clicking 'x' leads to the item page.") is None


def test_diagnosis_tells_a_faithful_rationale_from_a_yes_man():
    trajs = collect_trajectories("webshop", "test", 0, 0, mix={"near_miss": 16}, seed=1, batch_size=4)
    faithful = diagnose_purchases.diagnose(RecordedAnswers(trajs), trajs)
    assert faithful["n"] == 16 and faithful["false_positives"] == 0
    for k in (
        "parsed",
        "price_right",
        "type_right",
        "attributes_named",
        "all_checks_right",
        "self_consistent",
        "reward_right",
        "price_copied",
    ):
        assert faithful[k] == 1.0, k
    yes = diagnose_purchases.diagnose(RecordedAnswers(trajs, buy_success=True, edit=_yes_man), trajs)
    failures = sum(not t.success for t in trajs)
    assert failures > 0 and yes["false_positives"] == failures
    assert yes["causes"] == {
        "unparsed": 0,
        "failed_term_omitted": 0,
        "wrong_check": failures,
        "not_derived": 0,
    }
    assert yes["self_consistent"] == 1.0 and yes["reward_right"] == 1 - failures / 16
    assert yes["success_recall"] == 1.0 and yes["success_precision"] == (16 - failures) / 16
    assert faithful["success_precision"] == faithful["success_recall"] == 1.0
