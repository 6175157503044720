"""WebShop reward against hand-computed cases."""

import pytest

from dreamgym.envs.webshop.catalog import Product
from dreamgym.envs.webshop.goals import Goal
from dreamgym.envs.webshop.reward import (
    normalize_color,
    option_matches,
    outcome_reward,
    purchase_score,
    title_score,
    type_reward,
)


def _product(**kw) -> Product:
    base = dict(
        asin="B000000001",
        title="Acme Organic Chamomile Herbal Tea",
        description="A calming tea.",
        bullets=["CAFFEINE FREE: yes"],
        price_tag="$10.0",
        prices=[10.0],
        price=10.0,
        options={"size": ["20 count", "40 count"], "color": ["navy blue", "red"]},
        attributes=["organic", "non gmo"],
        category="grocery",
        query="herbal tea",
        product_category="Grocery › Beverages › Tea",
    )
    base.update(kw)
    return Product(**base)


def _goal(**kw) -> Goal:
    base = dict(
        goal_id="g",
        asin="B000000001",
        instruction_text="i need organic tea",
        attributes=["organic"],
        goal_options=["40 count"],
        price_upper=20.0,
        category="grocery",
        query="herbal tea",
        name="Acme Organic Chamomile Herbal Tea",
        product_category="Grocery › Beverages › Tea",
    )
    base.update(kw)
    return Goal(**base)


def test_full_match_is_success():
    r = purchase_score(_product(), _goal(), {"size": "40 count"})
    assert r.score == 1.0 and outcome_reward(r.score) == 1.0


def test_missing_option_gives_two_thirds():
    r = purchase_score(_product(), _goal(goal_options=["navy blue"]), {"color": "red"})
    assert r.score == pytest.approx(2 / 3)
    assert r.options_missed == ["navy blue"] and outcome_reward(r.score) == 0.0


def test_fuzzy_option_quirk_is_upstream():
    # token_set_ratio("20 count", "40 count") = 87.5 > 85: upstream (thefuzz) counts it as a match too
    assert option_matches(["20 count"], ["40 count"])[0] == ["40 count"]
    assert option_matches(["8 fl oz"], ["16 fl oz"])[0] == []


def test_attribute_via_text_substring_and_fuzzy():
    # "caffeine free" is not a product attribute but occurs in the bullets; "non-gmo" fuzzy-matches "non gmo"
    r = purchase_score(
        _product(), _goal(attributes=["caffeine free", "non-gmo", "vegan"], goal_options=[]), {}
    )
    assert r.attrs_matched == ["caffeine free", "non-gmo"] and r.attrs_missed == ["vegan"]
    assert r.score == pytest.approx(3 / 4)


def test_price_over_cap():
    r = purchase_score(_product(price=25.0), _goal(), {"size": "40 count"})
    assert not r.price_ok and r.score == pytest.approx(2 / 3)


def test_type_factor_halves_when_only_weak_title_overlap():
    # different query, category sharing < 2 parts, title overlap 1/5 = 0.2 (not > 0.2) -> r_type 0.5
    p = _product(query="coffee", product_category="Grocery › Coffee", title="Tea Kettle")
    r_type, qm, cm, ts = type_reward(p, _goal())
    assert (qm, cm) == (False, False) and ts == pytest.approx(0.2) and r_type == 0.5
    r = purchase_score(p, _goal(), {"size": "40 count"})
    assert r.score == pytest.approx(0.5)


def test_type_factor_zero_without_title_overlap():
    p = _product(query="socks", product_category="Clothing › Socks", title="Wool Hiking Socks")
    assert type_reward(p, _goal())[0] == 0.0
    assert purchase_score(p, _goal(), {"size": "40 count"}).score == 0.0


def test_type_factor_kept_by_category_match():
    p = _product(query="coffee", title="Mountain Roast Coffee Beans")  # same breadcrumb (3 shared parts)
    r_type, qm, cm, ts = type_reward(p, _goal())
    assert not qm and cm and ts == 0.0 and r_type == 0.0  # title_score == 0 overrides the category match


def test_title_score_content_words():
    assert title_score("Acme Herbal Tea", "Best Herbal Tea Bags") == pytest.approx(2 / 3)
    assert title_score("anything", "the best of") == 0.2  # no content words in the goal title


def test_color_normalisation_and_synthetic_dict_goal():
    assert normalize_color("navy blue") == "blue" and normalize_color("40 count") == "40 count"
    matched, missed = option_matches(["dark blue"], ["navy blue"])
    assert matched == ["navy blue"] and missed == []
    matched, missed = option_matches(["red", "40 count"], {"color": "red", "size": "20 count"})
    assert matched == ["red"] and missed == ["20 count"]


def test_success_exactly_one_not_099():
    assert outcome_reward(1.0) == 1.0
    assert outcome_reward(0.99) == 0.0 and outcome_reward(0.999999) == 0.0
    r = purchase_score(_product(), _goal(attributes=["organic"] * 99, goal_options=[]), {})
    assert r.score == 1.0
