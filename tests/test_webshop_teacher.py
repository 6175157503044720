"""The rule-based WebShop teacher writes short rationales faithful to the privileged info."""

from dreamgym.collect import collect_trajectories
from dreamgym.teachers import get_teacher
from dreamgym.teachers.webshop import WebShopTeacher


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
    teacher = WebShopTeacher()
    from dreamgym.schema import Transition

    tr = Transition("t", "i", 0, "s", "click[red]", "s2", 0.0, False)
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
    bad = Transition("t", "i", 0, "s", "click[zzz]", "s", 0.0, False, invalid=True)
    info = {"action_kind": "invalid", "valid": False, "reason": "'zzz' is not clickable on this page"}
    assert teacher.explain(bad, info) == (
        "The action 'click[zzz]' is invalid because 'zzz' is not clickable on this page, "
        "so the page stays the same and the reward is 0."
    )
