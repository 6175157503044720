"""The purchase checks as they can be made from visible text: the page and the instruction only.

The WebShop reward (:mod:`.reward`) decides a purchase from the goal's attributes, options and price
cap, and from the bought product's attributes, title, bullets, description, selected options and
hidden price. :func:`page_facts` reads what an abstract state (:mod:`.pages`) shows of a product;
:func:`check_purchase` applies the reward's own rules to those visible facts and to the goal's
terms, and records for each term whether the instruction names it at all. Two users:

- the teacher's checking rationale (:class:`dreamgym.teachers.webshop.WebShopTeacher`, ``rationale=
  "check"``) writes these checks and derives its verdict from them;
- the observability audit (:mod:`dreamgym.observability`) compares them with the real reward
  breakdown: a purchase is *observable* when every term is named by the instruction and the visible
  checks give the real verdict for every term.

Type factor: the reward compares the bought product with the goal's hidden target product (its
title, scrape query and category), which no page shows. The visible stand-in: the factor is 1 when
the product's title or category breadcrumb shares a content word (:func:`.reward.title_tokens`,
plural ``s`` dropped) with the instruction, else 0. On the bundled catalog's human goals it agrees
with the real factor for 98.8 % of target products, 93.6 % of other products of the goal's family and
94.3 % of random products: the rest depends on the hidden target title, and the observability audit
reports it as hidden under ``type``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rapidfuzz.utils import default_process

from dreamgym.envs.webshop.pages import SELECTED
from dreamgym.envs.webshop.reward import fuzzy_match, option_matches, title_tokens
from dreamgym.modeling.formats import clean_state

__all__ = [
    "PageFacts",
    "TermCheck",
    "PurchaseCheck",
    "page_facts",
    "price_cap",
    "named_in",
    "stems",
    "check_purchase",
]

_CAP_RE = re.compile(r"price lower than ([\d.]+) dollars")
_MONEY_RE = re.compile(r"\$([\d.]+)")
_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars")


@dataclass
class PageFacts:
    """What one abstract state shows of a product (empty fields where the page does not show them)."""

    asin: str = ""
    title: str = ""
    category: str = ""
    price: float | None = None  # the exact price, when the page shows one
    price_range: tuple[float, float] | None = None  # the listed range, when only that is shown
    attributes: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    description: str = ""
    selected: dict[str, str] = field(default_factory=dict)


@dataclass
class TermCheck:
    """One goal term checked against the page: ``where`` it was found (``None``: not found)."""

    term: str
    named: bool  # the instruction names the term
    where: str | None

    @property
    def ok(self) -> bool:
        return self.where is not None


@dataclass
class PurchaseCheck:
    """Every check of one purchase; ``price_ok`` / ``score`` are ``None`` when the page cannot decide."""

    attributes: list[TermCheck]
    options: list[TermCheck]
    price: float | None
    cap: float | None
    price_ok: bool | None
    r_type: float

    @property
    def n_terms(self) -> int:
        return len(self.attributes) + len(self.options) + 1

    @property
    def n_ok(self) -> int | None:
        if self.price_ok is None:
            return None
        return sum(c.ok for c in self.attributes + self.options) + int(self.price_ok)

    @property
    def score(self) -> float | None:
        """``r_type * (n_attr + n_opt + r_price) / (n_goal_attributes + n_goal_options + 1)``."""
        n_ok = self.n_ok
        return None if n_ok is None else self.r_type * n_ok / self.n_terms


def _money(text: str) -> list[float]:
    out = []
    for m in _MONEY_RE.findall(text):
        try:
            out.append(float(m.rstrip(".")))
        except ValueError:
            continue
    return out


def page_facts(state: str) -> PageFacts:
    """The product facts an abstract item / sub-page state shows (never raises on malformed text)."""
    f = PageFacts()
    for raw in str(state).splitlines():
        line = raw.strip()
        kind, _, text = line.partition("] ")
        kind = kind.lstrip("[")
        if kind == "page":
            parts = [p.strip() for p in text.split("|")]
            f.asin = parts[1] if len(parts) > 1 else ""
        elif kind == "title":
            f.title = text
        elif kind == "price":
            head, _, listed = text.partition(" (listed as ")
            vals = _money(head)
            if len(vals) == 1 and not listed and " to " not in head:
                f.price = vals[0]
            elif listed:
                f.price = vals[0] if vals else None
            elif len(vals) >= 2:
                f.price_range = (vals[0], vals[1])
        elif kind == "category":
            f.category = text
        elif kind == "attributes":
            f.attributes = [a.strip() for a in text.split(" ; ") if a.strip()]
        elif kind == "attribute":
            f.attributes.append(text.strip())
        elif kind == "bullet":
            f.bullets.append(text.strip())
        elif kind == "text" and text != "no reviews":
            f.description = text.strip()
        elif kind.startswith("option "):
            for v in text.split(" ; "):
                v = v.strip()
                if v.endswith(SELECTED):
                    f.selected[kind[len("option ") :]] = v[: -len(SELECTED)].strip()
    return f


def listed_products(state: str) -> list[tuple[str, str, list[float]]]:
    """The results page's ``[product] asin | title | $p1 to $p2`` lines as ``(asin, title, [p1, p2])``
    (titles may contain `` | ``)."""
    out = []
    for line in str(state).splitlines():
        if line.startswith("[product] "):
            parts = line[len("[product] ") :].split(" | ")
            out.append((parts[0].strip(), " | ".join(parts[1:-1]), _money(parts[-1])))
    return out


def price_cap(instruction: str) -> float | None:
    """The instruction's ``price lower than X dollars`` cap, or ``None`` when it states none."""
    m = _CAP_RE.search(instruction.lower())
    return float(m.group(1).rstrip(".")) if m else None


def named_in(term: str, instruction: str) -> bool:
    """Whether ``instruction`` names ``term`` (whole words, case and punctuation ignored)."""
    return f" {default_process(term)} " in f" {default_process(instruction)} "


def _attribute_where(term: str, f: PageFacts) -> str | None:
    """Where the reward's attribute rule finds ``term`` on the page (the reward's order of checks)."""
    if any(fuzzy_match(a, term) for a in f.attributes):
        return "attributes"
    for where, text in (("title", f.title), ("bullets", " ".join(f.bullets)), ("description", f.description)):
        if term in text.lower():
            return where
    return None


def stems(text: str) -> set[str]:
    """Content words of ``text`` without its price clause or a plural ``s`` ("towels" = "towel")."""
    words = title_tokens(_PRICE_CLAUSE.sub("", text))
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words}


def check_purchase(
    instruction: str, state: str, attributes: list[str], options: list[str] | dict[str, str]
) -> PurchaseCheck:
    """The reward's checks of buying from ``state`` for a goal with ``attributes`` and ``options``.

    Args:
        instruction: the task instruction (its price clause gives the cap).
        state: the abstract state the purchase is made from (item page or a sub-page).
        attributes: the goal's attribute terms.
        options: the goal's option values (list) or name -> value (dict, synthetic goals).
    """
    f = page_facts(state)
    attrs = [TermCheck(a, named_in(a, instruction), _attribute_where(a, f)) for a in attributes]
    values = list(options.values()) if isinstance(options, dict) else list(options)
    matched, _ = option_matches(list(f.selected.values()), options)
    opts = [TermCheck(v, named_in(v, instruction), "selected" if v in matched else None) for v in values]
    cap = price_cap(instruction)
    if f.price is not None:
        price, price_ok = f.price, cap is None or f.price <= cap
    elif f.price_range is not None:
        lo, hi = f.price_range
        price = None
        price_ok = True if cap is None or hi <= cap else (False if lo > cap else None)
    else:
        price, price_ok = None, None
    shared = stems(f"{f.title} {f.category}") & stems(instruction)
    r_type = 1.0 if shared else 0.0
    return PurchaseCheck(attrs, opts, price, cap, price_ok, r_type)


_JUDGE_TEXT = 240  # characters the judge keeps of the features and of the description


def webshop_page_summary(instruction: str, state: str) -> str:
    """The judge's view of a WebShop page bought from: its product facts and chosen options, one line.

    Example: ``"title: coastline road walking shoes | price: $30.09, within the cap of $120.00 |
    category: ... | attributes: non slip ; memory foam | color: navy blue | size: none selected"``.
    """
    f = page_facts(state)
    cap = price_cap(instruction)
    parts = [f"title: {f.title}"]
    if f.price is not None:
        price = f"${f.price:.2f}"
    elif f.price_range is not None:
        price = f"${f.price_range[0]:.2f} to ${f.price_range[1]:.2f}"
    else:
        price = "not shown"
    if cap is None:
        parts.append(f"price: {price}, no cap")
    elif f.price is None and f.price_range is None:
        parts.append(f"price: not shown, cap ${cap:.2f}")
    else:
        top = f.price if f.price is not None else f.price_range[1]  # type: ignore[index]
        parts.append(f"price: {price}, {'within' if top <= cap else 'over'} the cap of ${cap:.2f}")
    if f.category:
        parts.append(f"category: {f.category}")
    if f.attributes:
        parts.append("attributes: " + " ; ".join(f.attributes))
    if f.bullets:
        parts.append("features: " + " ; ".join(f.bullets)[:_JUDGE_TEXT])
    if f.description:
        parts.append("description: " + f.description[:_JUDGE_TEXT])
    for line in clean_state(state).splitlines():  # every option group, chosen or not
        if line.startswith("[option "):
            group = line[len("[option ") :].split("]", 1)[0]
            parts.append(f"{group}: {f.selected.get(group, 'none selected')}")
    return " | ".join(parts)
