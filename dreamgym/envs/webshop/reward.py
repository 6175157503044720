"""WebShop purchase reward (upstream ``engine/goal.py`` semantics), as plain callables.

``score = r_type * (n_attr + n_opt + r_price) / (len(goal.attributes) + len(goal_options) + 1)``

- ``r_type`` (:func:`type_reward`): start at 1; if none of (query match, product_category sets sharing
  >= 2 parts, title_score > 0.2) holds -> 0.5; then title_score < 0.1 -> 0.1; then title_score == 0 -> 0.
- ``n_attr`` (:func:`attribute_matches`): a goal attribute counts if some product attribute has
  ``token_set_ratio > 85`` or the attribute string occurs in the lower-cased title, bullets or description.
- ``n_opt`` (:func:`option_matches`): both sides are colour-normalised (:func:`normalize_color`: the first
  word of ``COLOR_SET`` contained in the string replaces it); a goal option counts if some selected
  value has ``token_set_ratio > 85``. For synthetic (dict) goals upstream compares ``str((name, value))``;
  after fuzzy preprocessing that is ``"name value"``, whose token set contains the value's, so we
  compare ``"name value"`` strings too.
- ``r_price``: hidden price <= ``price_upper``.

Fuzzy matching is rapidfuzz's ``token_set_ratio`` with ``default_process`` (lower-case, non-alphanumerics
removed), the closest equivalent of thefuzz 0.19's default.

**title_score without spaCy.** Upstream keeps the NOUN/PROPN tokens of both titles (spaCy POS tags)
and scores ``|set(bought) & set(goal)| / len(goal tokens)``. spaCy and its models are not available
offline here, so :func:`title_tokens` keeps *content words*: lower-cased alphabetic tokens of at least
two letters that are not stop words, not common adjectives/marketing words and not units. In product
titles nouns dominate the content words, so the score is close to upstream's; it is deterministic,
needs no model, and only matters for purchases outside the goal's query family.

The env's outcome reward (:func:`outcome_reward`) is binary: 1.0 iff the score is exactly 1.0.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from dreamgym.envs.webshop.catalog import Product
from dreamgym.envs.webshop.goals import Goal

__all__ = [
    "COLOR_SET",
    "RewardBreakdown",
    "normalize_color",
    "fuzzy_match",
    "title_tokens",
    "title_score",
    "type_reward",
    "attribute_matches",
    "option_matches",
    "purchase_score",
    "outcome_reward",
]

COLOR_SET = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "beige",
    "black",
    "blue",
    "blush",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cream",
    "crimson",
    "emerald",
    "fuchsia",
    "gold",
    "gray",
    "grey",
    "green",
    "honey",
    "ivory",
    "khaki",
    "lavender",
    "leopard",
    "lilac",
    "magenta",
    "mahogany",
    "maroon",
    "mauve",
    "mint",
    "multicolor",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pink",
    "plum",
    "purple",
    "red",
    "rose",
    "rust",
    "sage",
    "sand",
    "silver",
    "taupe",
    "teal",
    "turquoise",
    "violet",
    "walnut",
    "white",
    "wine",
    "yellow",
]
_COLOR_RE = [(c, re.compile(re.escape(c))) for c in COLOR_SET]
_STOP = frozenset(
    "a an and are as at be but by for from if in into is it its no not of on or such that the their then there "
    "these they this to was will with x w new best premium pro plus max lite classic select essential "
    "large small medium mini extra super ultra soft heavy light duty set pack count piece pieces inch inches "
    "oz ounce ounces lb lbs pound pounds ft fl ml mm cm men women mens womens kids".split()
)


@dataclass
class RewardBreakdown:
    """Every term of one purchase score (also shown to the teacher)."""

    score: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attrs_matched: list[str] = field(default_factory=list)
    attrs_missed: list[str] = field(default_factory=list)
    options_matched: list[str] = field(default_factory=list)
    options_missed: list[str] = field(default_factory=list)
    price_ok: bool = True
    price: float = 0.0
    price_upper: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_color(text: str) -> str:
    """Replace ``text`` by the first ``COLOR_SET`` word it contains (as a substring), else keep it."""
    for color, pat in _COLOR_RE:
        if pat.search(text):
            return color
    return text


def fuzzy_match(a: str, b: str, threshold: float = 85) -> bool:
    """``token_set_ratio(a, b) > threshold`` with thefuzz-like preprocessing."""
    return fuzz.token_set_ratio(a, b, processor=default_process) > threshold


def title_tokens(title: str) -> list[str]:
    """Content-word tokens of a title (our stand-in for spaCy NOUN/PROPN tokens; see module doc)."""
    return [t for t in re.findall(r"[a-z]+", title.lower()) if len(t) >= 2 and t not in _STOP]


def title_score(bought_title: str, goal_title: str) -> float:
    """``|set(bought) & set(goal)| / len(goal tokens)`` over :func:`title_tokens`; 0.2 if the goal has none."""
    goal = title_tokens(goal_title)
    if not goal:
        return 0.2
    return len(set(title_tokens(bought_title)) & set(goal)) / len(goal)


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` (module docstring)."""
    query_match = product.query == goal.query
    pc = {x.strip() for x in product.product_category.split("›")}
    gc = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(pc & gc) >= 2
    ts = title_score(product.title, goal.name)
    r_type = 1.0
    if not (query_match or category_match or ts > 0.2):
        r_type = 0.5
    if ts < 0.1:
        r_type = 0.1
    if ts == 0:
        r_type = 0.0
    return r_type, query_match, category_match, ts


def attribute_matches(product: Product, goal_attributes: list[str]) -> tuple[list[str], list[str]]:
    """``(matched, missed)`` goal attributes for ``product``."""
    title = product.title.lower()
    bullets = " ".join(product.bullets).lower()
    desc = product.description.lower()
    matched, missed = [], []
    for g in goal_attributes:
        ok = any(fuzzy_match(p, g) for p in product.attributes)
        ok = ok or g in title or g in bullets or g in desc
        (matched if ok else missed).append(g)
    return matched, missed


def option_matches(
    selected: list[str], goal_options: list[str] | dict[str, str]
) -> tuple[list[str], list[str]]:
    """``(matched, missed)`` goal option values given the ``selected`` option values."""
    if isinstance(goal_options, dict):
        goal_items = [(v, f"{k} {v}") for k, v in goal_options.items()]
    else:
        goal_items = [(v, v) for v in goal_options]
    sel = [normalize_color(s) for s in selected]
    matched, missed = [], []
    for label, g in goal_items:
        gn = normalize_color(g)
        (matched if any(fuzzy_match(s, gn) for s in sel) else missed).append(label)
    return matched, missed


def purchase_score(product: Product, goal: Goal, selected_options: dict[str, str]) -> RewardBreakdown:
    """The upstream purchase score of buying ``product`` with ``selected_options`` for ``goal``."""
    r_type, qm, cm, ts = type_reward(product, goal)
    am, amiss = attribute_matches(product, goal.attributes)
    om, omiss = option_matches(list(selected_options.values()), goal.goal_options)
    price_ok = product.price <= goal.price_upper
    n_opts = len(goal.goal_options)
    total = r_type * (len(am) + len(om) + float(price_ok)) / (len(goal.attributes) + n_opts + 1)
    return RewardBreakdown(
        total, r_type, qm, cm, ts, am, amiss, om, omiss, price_ok, product.price, goal.price_upper
    )


def outcome_reward(score: float) -> float:
    """Binary outcome reward: 1.0 iff the purchase ``score`` is exactly 1.0."""
    return 1.0 if score == 1.0 else 0.0
