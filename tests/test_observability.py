"""The observability audit: a purchase counts as observable only if the prompt decides its reward."""

import dataclasses

import pytest

from dreamgym.collect import collect_trajectories
from dreamgym.envs.webshop.checks import page_facts
from dreamgym.observability import audit, format_report


@pytest.fixture(scope="module")
def expert_trajs():
    return collect_trajectories(
        "webshop", "train", n_expert=12, n_random=0, seed=4, batch_size=4, teacher=False
    )


def _hide(traj, prefix):
    """A copy of ``traj`` whose purchase state lacks the lines starting with ``prefix``."""
    last = traj.transitions[-1]
    state = "\n".join(ln for ln in last.state.splitlines() if not ln.startswith(prefix))
    return dataclasses.replace(
        traj, transitions=[*traj.transitions[:-1], dataclasses.replace(last, state=state)]
    )


def _observable(traj):
    return audit("webshop", [traj])["all"]["purchase_share"]


def test_a_hidden_reward_fact_makes_the_purchase_unobservable(expert_trajs):
    # an expert purchase whose attribute terms are all decided by the [attributes] line
    traj = next(
        t
        for t in expert_trajs
        if _observable(t) == 1.0
        and "[attributes]" in t.transitions[-1].state
        and not any(
            a.lower() in t.transitions[-1].state.split("[title] ")[1].splitlines()[0].lower()
            for a in t.transitions[-1].state.split("[attributes] ")[1].splitlines()[0].split(" ; ")
        )
    )
    assert _observable(_hide(traj, "[attributes]")) == 0.0
    assert audit("webshop", [_hide(traj, "[attributes]")])["all"]["attributes"] == 0.0
    hidden_price = _hide(traj, "[price]")
    assert audit("webshop", [hidden_price])["all"]["price"] == 0.0
    assert _observable(hidden_price) == 0.0


def test_item_facts_are_what_makes_expert_purchases_observable(expert_trajs):
    old = collect_trajectories(
        "webshop", "train", 12, 0, seed=4, batch_size=4, teacher=False, env_kwargs={"item_facts": False}
    )
    new, before = audit("webshop", expert_trajs)["expert"], audit("webshop", old)["expert"]
    assert new["purchases"] == before["purchases"] == 12
    assert new["attributes"] == 1.0 and new["price"] == 1.0 and new["named"] == 1.0
    assert before["attributes"] < 0.5 and before["purchase_share"] < new["purchase_share"]
    table = format_report({"expert": new})
    assert table.splitlines()[2].startswith("| expert | 12 |")


def test_page_facts_reads_the_item_page(expert_trajs):
    state = expert_trajs[0].transitions[-1].state
    f = page_facts(state)
    assert f.title and f.price is not None and f.asin == state.splitlines()[0].split("| ")[1]


def test_unaudited_env_is_refused():
    with pytest.raises(ValueError, match="no observability audit for env 'alfworld'"):
        audit("alfworld", [])


def test_choice_audit_ranks_each_click_by_the_visible_results_page(expert_trajs):
    from dreamgym.observability import webshop_choice_audit

    # a results page the expert opened a product from; rewrite the click to each listed product
    traj = next(t for t in expert_trajs if any(x.state.startswith("[page] results") for x in t.transitions))
    step = next(x for x in traj.transitions if x.state.startswith("[page] results"))
    instruction = "blue cotton towel, and price lower than 50.00 dollars"
    state = "\n".join([
        "[page] results | query: towel | page 1 | total results: 3", "[button] back to search", "[button] next >",
        "[product] b0aaaaaaaa | Red Wool Blanket | $12.00",
        "[product] b0bbbbbbbb | Blue Cotton Towel | $60.00",  # the best words, over the cap
        "[product] b0cccccccc | Blue Cotton Bath Towel | $20.00",  # within the cap, 3 words: best
        "[product] b0dddddddd | Cotton Towel Blue | $30.00",  # also within the cap, 3 words
    ])  # fmt: skip

    def report(action, page=state):
        t = dataclasses.replace(traj, instruction=instruction, transitions=[
            dataclasses.replace(step, instruction=instruction, state=page, action=action)])  # fmt: skip
        return webshop_choice_audit([t])

    def shares(action, page=state):
        return report(action, page)["all"]

    assert shares("click[b0aaaaaaaa]")["below"] == 1.0 and shares("click[b0bbbbbbbb]")["below"] == 1.0
    assert shares("click[b0cccccccc]")["tied"] == 1.0  # ties with b0dddddddd (same price-ok, 3 words)
    unique = state.replace("Cotton Towel Blue", "Towel")
    assert shares("click[b0cccccccc]", unique)["best"] == 1.0
    assert shares("click[b0zzzzzzzz]")["unlisted"] == 1.0
    assert report("click[next >]") == {}  # a button is not a product choice
