"""WebShop pages: action parsing, transitions, renderings and available-action inference."""

import pytest

from dreamgym.envs.webshop.catalog import load_catalog
from dreamgym.envs.webshop.pages import (
    PageState,
    apply_action,
    available_actions,
    infer_available_actions,
    parse_action,
    render_abstract,
    render_text,
)
from dreamgym.envs.webshop.search import get_search_engine


@pytest.fixture(scope="module")
def shop():
    cat = load_catalog()
    return cat, get_search_engine(cat)


def _with_options(cat):
    return next(p for p in cat.products.values() if len(p.options) >= 2)


@pytest.mark.parametrize(
    "action, expected",
    [
        ("search[Red Tea]", ("search", "red tea")),
        ("click[Buy Now]", ("click", "buy now")),
        ("click[a]b]", ("click", "a]b")),  # greedy: up to the last ]
        ("  click[< Prev]  ", ("click", "< prev")),
        ("click[]", None),
        ("buy now", None),
        ("click buy", None),
    ],
)
def test_parse_action(action, expected):
    assert parse_action(action) == expected


def test_search_then_pages(shop):
    cat, eng = shop
    tr = apply_action(PageState(), "search[herbal tea organic]", cat, eng)
    assert tr.valid and tr.page.kind == "results" and tr.page.page == 1 and len(tr.page.results) == 50
    acts = available_actions(tr.page, cat)
    assert acts[:2] == ["click[back to search]", "click[next >]"] and len(acts) == 12
    p5 = tr.page
    for _ in range(5):
        p5 = apply_action(p5, "click[next >]", cat, eng).page
    assert p5.page == 6 and p5.page_results() == []  # past the last page: empty, Next > still there
    assert "click[next >]" in available_actions(p5, cat) and "click[< prev]" in available_actions(p5, cat)
    assert "[button] next >" in render_abstract(p5, cat)


def test_empty_results(shop):
    cat, eng = shop
    tr = apply_action(PageState(), "search[zzzqqq xxyyzz]", cat, eng)
    assert tr.valid and tr.page.results == []
    assert render_text(tr.page, cat, "buy x") == (
        "Instruction: [SEP] buy x [SEP] Back to Search [SEP] Page 1 (Total results: 0) [SEP] Next >"
    )


def test_item_options_prev_and_clear(shop):
    cat, eng = shop
    p = _with_options(cat)
    res = apply_action(PageState(), f"search[{p.title}]", cat, eng).page
    res = apply_action(res, "click[next >]", cat, eng).page  # on page 2
    res.results.insert(10, p.asin)  # make sure the product is on this page
    item = apply_action(res, f"click[{p.asin.lower()}]", cat, eng)
    assert item.valid and item.page.kind == "item" and item.page.asin == p.asin
    name, vals = next(iter(p.options.items()))
    sel = apply_action(item.page, f"click[{vals[-1]}]", cat, eng)
    assert sel.valid and sel.page.options == {name: vals[-1]} and sel.selected == (name, vals[-1])
    assert f"{vals[-1]} (selected)" in render_abstract(sel.page, cat)
    sub = apply_action(sel.page, "click[features]", cat, eng)
    assert sub.page.kind == "features" and sub.page.options == {name: vals[-1]}
    back = apply_action(sub.page, "click[< prev]", cat, eng)
    assert back.page.kind == "item" and back.page.options == {name: vals[-1]}
    res2 = apply_action(back.page, "click[< prev]", cat, eng)
    assert res2.page.kind == "results" and res2.page.page == 2 and res2.page.options == {}
    new = apply_action(back.page, "search[tea]", cat, eng)  # search runs on any page, options cleared
    assert new.page.kind == "results" and new.page.options == {}
    home = apply_action(back.page, "click[back to search]", cat, eng)
    assert home.page == PageState()


def test_invalid_actions_are_noops(shop):
    cat, eng = shop
    page = apply_action(PageState(), "search[tea]", cat, eng).page
    for bad in ["click[buy now]", "click[search]", "jump[now]", "hello", "click[b000000000]", "search[]"]:
        tr = apply_action(page, bad, cat, eng)
        assert not tr.valid and tr.page is page and tr.kind == "invalid" and tr.reason
    assert not apply_action(PageState(), "click[search]", cat, eng).valid


def test_text_rendering_matches_upstream(shop):
    cat, eng = shop
    p = _with_options(cat)
    item = PageState("item", "kw", [p.asin], 1, p.asin)
    segs = ["Instruction:", "do it", "Back to Search", "< Prev"]
    for name, vals in p.options.items():
        segs += [name, *vals]
    segs += [
        p.title,
        f"Price: {p.price_tag}",
        "Rating: N.A.",
        "Description",
        "Features",
        "Reviews",
        "Buy Now",
    ]
    assert render_text(item, cat, "do it") == " [SEP] ".join(segs)
    assert render_text(PageState(), cat, "do it") == "WebShop [SEP] Instruction: [SEP] do it [SEP] Search"
    reviews = PageState("reviews", "kw", [p.asin], 1, p.asin)
    assert render_text(reviews, cat, "do it") == "Instruction: [SEP] do it [SEP] Back to Search [SEP] < Prev"
    res = apply_action(PageState(), "search[tea]", cat, eng).page
    res.page = 2
    text = render_text(res, cat, "do it").split(" [SEP] ")
    assert text[:6] == [
        "Instruction:",
        "do it",
        "Back to Search",
        f"Page 2 (Total results: {len(res.results)})",
        "< Prev",
        "Next >",
    ]
    first = cat.products[res.results[10]]
    assert text[6:9] == [first.asin, first.title, first.price_tag]
    done = PageState("done", asin=p.asin, options={"size": "m", "color": "red"}, score=0.5)
    d = render_text(done, cat, "x")
    assert d.startswith(
        "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk"
    )
    assert (
        f'asin [SEP] {p.asin} [SEP] options [SEP] {{"color": "red", "size": "m"}} [SEP] attrs [SEP] None' in d
    )
    assert d.endswith("Your score (min 0.0, max 1.0) [SEP] 0.5 [SEP] Reward Details [SEP] None")


def test_infer_available_actions_round_trip(shop):
    cat, eng = shop
    p = _with_options(cat)
    pages = [
        PageState(),
        apply_action(PageState(), "search[tea]", cat, eng).page,
        PageState(
            "item", "kw", [p.asin], 1, p.asin, {next(iter(p.options)): next(iter(p.options.values()))[0]}
        ),
        PageState("description", "kw", [p.asin], 1, p.asin),
        PageState("done", asin=p.asin, score=1.0),
    ]
    for page in pages:
        for attrs in (False, True):
            assert infer_available_actions(render_abstract(page, cat, attrs)) == available_actions(
                page, cat, attrs
            )


def test_infer_is_robust_to_garbage():
    assert infer_available_actions("") == []
    assert infer_available_actions(None) == []
    messy = "[page] item | b0\n[button] buy now\n[option size] small ; large (selected) ;\n[product] \n[butt"
    assert infer_available_actions(messy) == ["click[buy now]", "click[small]", "click[large]"]


def test_search_with_unknown_words_never_raises(shop):
    cat, eng = shop
    tr = apply_action(PageState(), "search[qqqq zzzz xyzzy-42 herbal tea]", cat, eng)
    assert tr.valid and tr.page.results == eng.search("herbal tea")


def test_search_special_prefixes_and_blank(shop):
    cat, eng = shop
    grocery = eng.search("<c> grocery")
    assert len(grocery) == 50 and all(cat.products[a].category == "grocery" for a in grocery)
    assert all(cat.products[a].query == "herbal tea" for a in eng.search("<q> herbal tea"))
    assert eng.search("<r>") == eng.search("<r>") and len(set(eng.search("<r>"))) == 50
    blank = apply_action(PageState(), "search[ ]", cat, eng)
    assert blank.valid and blank.page.kind == "results" and blank.page.results == []
