"""The rule-based WebShop teacher writes short rationales faithful to the privileged info, whose purchase
checks parse back."""

import re

from dreamgym.collect import collect_trajectories
from dreamgym.teachers import get_teacher
from dreamgym.teachers.webshop import WebShopTeacher, parse_purchase_checks


def test_teacher_rationales_follow_the_transition():
    trajs = collect_trajectories("webshop", "train", n_expert=6, n_random=6, seed=5, batch_size=4)
    assert isinstance(get_teacher("webshop"), WebShopTeacher)
    seen = set()
    for t in trajs:
        for tr in t.transitions:
            r = tr.reasoning
            assert r and r.count(". ") <= 3 and len(r) < 400
            if tr.invalid:
                assert r.startswith(f"The action '{tr.action}' is invalid") and "reward is 0" in r
                seen.add("invalid")
            elif tr.action.startswith("search["):
                assert r.startswith("Searching '") and "results" in r
                seen.add("search")
            elif tr.terminated:
                assert r.startswith("Buying ") and f"score is {tr.score:.2f}" in r
                assert r.endswith("the reward is 1.") == tr.success
                seen.add("buy")
            if tr.truncated and not tr.terminated:
                assert "step limit" in r
    assert {"search", "buy"} <= seen


def test_option_and_invalid_messages():
    teacher = WebShopTeacher(rationale="verdict")
    from dreamgym.schema import Transition

    tr = Transition("t", "i want a blue shirt", 0, "s", "click[red]", "s2", 0.0, False)
    info = {
        "action_kind": "click",
        "valid": True,
        "target": "red",
        "page": "item",
        "prev_page": "item",
        "selected": ("color", "red"),
        "goal": {"options": ["blue"]},
    }
    assert teacher.explain(tr, info) == (
        "Selecting 'red' sets color to red on the same item page. The goal asks for 'blue' instead."
    )
    assert WebShopTeacher().explain(tr, info) == (
        "Selecting 'red' sets color to red on the same item page. The instruction does not name it."
    )
    bad = Transition("t", "i", 0, "s", "click[zzz]", "s", 0.0, False, invalid=True)
    info = {"action_kind": "invalid", "valid": False, "reason": "'zzz' is not clickable on this page"}
    assert teacher.explain(bad, info) == (
        "The action 'click[zzz]' is invalid because 'zzz' is not clickable on this page, "
        "so the page stays the same and the reward is 0."
    )


def test_checking_rationale_derives_the_verdict_from_checks_on_the_page():
    """Each purchase check names where the term is on the page; the count of passing checks and the
    verdict follow from them, and every attribute the check finds is in the prompt's state."""
    trajs = collect_trajectories("webshop", "train", n_expert=8, n_random=8, seed=2, batch_size=4)
    buys = [tr for t in trajs for tr in t.transitions if tr.terminated]
    assert len(buys) >= 8
    for tr in buys:
        r = tr.reasoning
        body = r.split("Checks: ", 1)[1].rsplit(" checks pass", 1)[0]
        terms = body.split("; type:")[0].split("; ")  # the type factor is a factor, not a counted term
        passed, total = (int(x) for x in body.rsplit(" ", 1)[1].split("/"))
        assert total == len(terms) and passed == sum(c.endswith(" yes") for c in terms)
        assert r.endswith("the reward is 1.") == tr.success
        for term in re.findall(r"'([^']+)' in attributes yes", r):
            assert term in tr.state.split("[attributes] ", 1)[1].splitlines()[0]
    assert any(not tr.success for tr in buys) and any(tr.success for tr in buys)


def test_verdict_rationale_is_kept_for_the_ablation():
    trajs = collect_trajectories(
        "webshop", "train", n_expert=3, n_random=0, seed=2, teacher_kwargs={"rationale": "verdict"}
    )
    buy = trajs[0].transitions[-1].reasoning
    assert " attributes and " in buy and "Checks:" not in buy


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
