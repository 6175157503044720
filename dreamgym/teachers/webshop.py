"""Rule-based WebShop teacher: a short, faithful rationale per transition from the env's privileged info.

It reads :meth:`dreamgym.envs.webshop.WebShopEnv.step_info` (goal, page, which shown products fit the
goal and why, the selected option, the reward breakdown, why an action was invalid) and writes 1-3
plain sentences. Two styles (``rationale``):

- ``"check"`` (default): claims only what the prompt lets one check. At a purchase, every reward
  term is checked against where it appears on the page (:func:`dreamgym.envs.webshop.checks.
  check_purchase`) and the verdict is derived from the checks, e.g. ``"Buying b0co4iytpd ends the
  episode. Checks: price $42.88 <= $80.00 yes; 'machine washable' in attributes yes; option 'brown'
  selected yes; type: 'towel' shared with the goal yes. 4/4 checks pass, so the score is 1.00 and the
  reward is 1."``; on results pages only what the page shows (the listed title that shares the most
  words with the instruction, how many listed prices are within the cap).
- ``"verdict"``: the older style that states hidden verdicts (``"it matches 2/2 attributes"``, which
  listed products "fit the goal"), kept for the ablation.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dreamgym.envs.webshop.checks import (
    check_purchase,
    listed_products,
    named_in,
    page_facts,
    price_cap,
    stems,
)
from dreamgym.schema import Transition
from dreamgym.teachers.base import Teacher

__all__ = ["WebShopTeacher", "RATIONALES", "PurchaseClaims", "parse_purchase_checks"]

RATIONALES = ("check", "verdict")


def _q(items: list[str], n: int = 3) -> str:
    return ", ".join(f"'{x}'" for x in items[:n])


class WebShopTeacher(Teacher):
    """Explains WebShop transitions (see module docstring).

    Args:
        rationale: ``"check"`` (checks the prompt shows, verdict derived) or ``"verdict"`` (older style).
    """

    def __init__(self, rationale: str = "check"):
        if rationale not in RATIONALES:
            raise ValueError(f"WebShopTeacher: rationale={rationale!r} is not one of {RATIONALES}")
        self.rationale = rationale

    def explain(self, transition: Transition, info: dict[str, Any]) -> str:
        text = self._explain(transition, info or {})
        if transition.truncated and not transition.terminated:
            text += " The step limit is reached, so the episode ends without a purchase and the reward is 0."
        return text

    def _explain(self, t: Transition, info: dict[str, Any]) -> str:
        if not info or "action_kind" not in info:
            return "No privileged information is available for this step."
        if not info.get("valid", True) or t.invalid:
            return (
                f"The action '{t.action}' is invalid because {info.get('reason') or 'it is not available'}, "
                "so the page stays the same and the reward is 0."
            )
        if info["action_kind"] == "search":
            return f"Searching '{info['keywords']}' returns {info['num_results']} results. " + self._results(
                info, t
            )
        target = info.get("target", "")
        prev, page = info.get("prev_page"), info.get("page")
        if info.get("bought"):
            return self._checked_purchase(info, t) if self.rationale == "check" else self._bought(info, t)
        if target == "back to search":
            return (
                "Back to search returns to the empty search page; the previous search and options are reset."
            )
        if page == "results":
            how = "Going back from the item page" if prev == "item" else f"Clicking '{target}'"
            note = " and the selected options are cleared" if prev == "item" else ""
            return f"{how} shows results page {info['page_num']} of the same search{note}. " + self._results(
                info, t
            )
        if info.get("selected"):
            name, value = info["selected"]
            return self._option(info, name, value, t)
        if page == "item" and prev in ("description", "features", "reviews", "attributes"):
            return (
                "Clicking '< prev' returns from the sub-page to the item page; the selected options are kept."
            )
        if page == "item":
            return self._checked_item(info, t) if self.rationale == "check" else self._opened(info)
        if page in ("description", "features", "reviews", "attributes"):
            what = {
                "description": "its description",
                "features": "its bullet points",
                "reviews": "its reviews (there are none)",
                "attributes": "its attribute list",
            }[page]
            return f"Clicking '{page}' shows {what}; the selected options are kept."
        return f"Clicking '{target}' leads to the {page} page."

    def _results(self, info: dict[str, Any], t: Transition) -> str:
        shown = info.get("shown") or []
        if not shown:
            return "This page lists no products."
        if self.rationale == "check":
            return self._checked_results(t)
        fit = [s["asin"].lower() for s in shown if s["matches_goal"]]
        head = f"Page {info['page_num']} lists {len(shown)}"
        if fit:
            head += f", and {len(fit)} fit the goal ({', '.join(fit[:3])}{', ...' if len(fit) > 3 else ''})."
        else:
            head += ", and none fits the goal."
        missed = Counter(
            a for s in shown if not s["matches_goal"] for a in s["attrs_missed"] + s["options_missing"]
        )
        wrong_type = sum(1 for s in shown if not s["type_ok"])
        if missed:
            head += f" The others miss {_q([m for m, _ in missed.most_common(2)], 2)}"
            head += " or are another kind of product." if wrong_type else "."
        elif wrong_type and len(fit) < len(shown):
            head += " The others are another kind of product."
        return head

    @staticmethod
    def _opened(info: dict[str, Any]) -> str:
        p = info.get("product") or {}
        opts = info.get("product_options") or {}
        names = f" with options for {_q(list(opts), 3)}" if opts else " with no options"
        s = f"Opening {str(info.get('asin', '')).lower()} shows its item page{names}."
        if p.get("matches_goal"):
            return s + " It has every goal attribute and the goal's option values."
        gaps = p.get("attrs_missed", []) + p.get("options_missing", [])
        if not p.get("type_ok", True):
            return s + " It is not the kind of product the goal asks for."
        return s + (f" It lacks {_q(gaps)}." if gaps else " Its price is above the goal's limit.")

    def _option(self, info: dict[str, Any], name: str, value: str, t: Transition) -> str:
        s = f"Selecting '{value}' sets {name} to {value} on the same item page."
        if self.rationale == "check":
            named = named_in(value, t.instruction)
            return s + (" The instruction names it." if named else " The instruction does not name it.")
        goal_opts = info["goal"]["options"]
        vals = list(goal_opts.values()) if isinstance(goal_opts, dict) else list(goal_opts)
        if value in vals:
            return s + " It is one of the goal's options."
        if vals:
            return s + f" The goal asks for {_q(vals)} instead."
        return s + " The goal does not constrain options."

    @staticmethod
    def _bought(info: dict[str, Any], t: Transition) -> str:
        r = info.get("reward_info") or {}
        na = len(r.get("attrs_matched", [])) + len(r.get("attrs_missed", []))
        no = len(r.get("options_matched", [])) + len(r.get("options_missed", []))
        price = "within" if r.get("price_ok") else "above"
        s = (
            f"Buying {str(info.get('asin', '')).lower()} ends the episode: it matches "
            f"{len(r.get('attrs_matched', []))}/{na} attributes and {len(r.get('options_matched', []))}/{no} options, "
            f"and its price is {price} the limit"
        )
        if r.get("r_type", 1.0) < 1.0:
            s += f", but it is the wrong kind of product (type factor {r['r_type']:g})"
        s += f", so the score is {r.get('score', t.score):.2f}"
        if t.success:
            return s + " and the reward is 1."
        missed = r.get("attrs_missed", []) + r.get("options_missed", [])
        return s + (f" and the reward is 0 (missing {_q(missed)})." if missed else " and the reward is 0.")

    # ------------------------------------------------------------------ checking rationale
    @staticmethod
    def _checked_results(t: Transition) -> str:
        """What the results page shows: the best title match with the instruction and prices under the cap."""
        goal = stems(t.instruction)
        cap = price_cap(t.instruction)
        products = listed_products(t.next_state)
        if not products:
            return "This page lists no products."
        shared = [sorted(stems(p[1]) & goal) for p in products]
        best = max(range(len(products)), key=lambda i: len(shared[i]))
        s = f"The page lists {len(products)} products."
        if shared[best]:
            s += (
                f" The title sharing the most words with the goal is {products[best][0]}"
                f" ({_q(shared[best], 4)})."
            )
        else:
            s += " No listed title shares a word with the goal."
        if cap is not None:
            under = sum(1 for p in products if p[2] and min(p[2]) <= cap)
            s += f" {under} of {len(products)} are listed from at most ${cap:.2f}."
        return s

    @staticmethod
    def _checked_item(info: dict[str, Any], t: Transition) -> str:
        """The opened item page against the goal's terms, from what the page shows."""
        goal = info.get("goal") or {}
        c = check_purchase(t.instruction, t.next_state, goal.get("attributes", []), goal.get("options", []))
        opts = info.get("product_options") or {}
        s = f"Opening {str(info.get('asin', '')).lower()} shows its item page"
        s += f" with options for {_q(list(opts), 3)}." if opts else " with no options."
        if c.price is not None:
            within = "within" if c.price_ok else "above"
            s += f" Its price ${c.price:.2f} is {within} the limit." if c.cap is not None else ""
        found = [a.term for a in c.attributes if a.ok]
        missing = [a.term for a in c.attributes if not a.ok]
        if found:
            s += f" On the page: {_q(found, 5)}."
        if missing:
            s += f" Not on the page: {_q(missing, 5)}."
        return s

    @staticmethod
    def _checked_purchase(info: dict[str, Any], t: Transition) -> str:
        """Each reward term checked against the page, and the verdict derived from the checks."""
        goal = info.get("goal") or {}
        r = info.get("reward_info") or {}
        c = check_purchase(t.instruction, t.state, goal.get("attributes", []), goal.get("options", []))
        checks = []
        price_ok = r.get("price_ok", c.price_ok)
        price = f"${c.price:.2f}" if c.price is not None else "the price"
        cap = f"${c.cap:.2f}" if c.cap is not None else "no limit"
        checks.append(f"price {price} {'<=' if price_ok else '>'} {cap} {'yes' if price_ok else 'no'}")
        matched_a = set(r.get("attrs_matched", [a.term for a in c.attributes if a.ok]))
        for a in c.attributes:
            where = a.where or "the product details"
            ok = a.term in matched_a
            checks.append(f"'{a.term}' in {where} yes" if ok else f"'{a.term}' not on the page no")
        matched_o = set(r.get("options_matched", [o.term for o in c.options if o.ok]))
        for o in c.options:
            checks.append(f"option '{o.term}' {'selected yes' if o.term in matched_o else 'not selected no'}")
        n_ok = sum(x.endswith(" yes") for x in checks)
        r_type = float(r.get("r_type", c.r_type))
        f = page_facts(t.state)
        shared = sorted(stems(f"{f.title} {f.category}") & stems(t.instruction))
        asin = str(info.get("asin", "")).lower()
        s = f"Buying {asin} ends the episode. Checks: " + "; ".join(checks)
        if r_type >= 1.0:
            s += (
                f"; type: {_q(shared, 2)} shared with the goal yes."
                if shared
                else "; type: the goal's kind yes."
            )
        else:
            s += f"; type: not the goal's kind of product no (type factor {r_type:g})."
        score = float(r.get("score", t.score))
        s += f" {n_ok}/{len(checks)} checks pass"
        s += (
            f", so the score is {score:.2f}"
            if r_type >= 1.0
            else f", times {r_type:g}: the score is {score:.2f}"
        )
        return s + (" and the reward is 1." if t.success else " and the reward is 0.")


@dataclass
class PurchaseClaims:
    """What a checking purchase rationale (the teacher's, or an experience model's imitation) claims."""

    price: float | None = None  # the price it read off the page (None: "the price" or unreadable)
    cap: float | None = None  # the cap it read off the instruction (None: "no limit" or unreadable)
    price_ok: bool | None = None
    attributes: dict[str, bool] = field(default_factory=dict)  # goal attribute it names -> found
    options: dict[str, bool] = field(default_factory=dict)  # goal option it names -> selected
    type_ok: bool | None = None
    reward: int | None = None  # the verdict it ends with

    @property
    def derived_reward(self) -> int | None:
        """The verdict its own checks imply: 1 when every check and the type pass (None: unreadable)."""
        if self.price_ok is None or self.type_ok is None:
            return None
        return int(
            self.price_ok and self.type_ok and all(self.attributes.values()) and all(self.options.values())
        )


_PRICE = re.compile(r"^price (?:\$([\d.]+)|the price) (?:<=|>) (?:\$([\d.]+)|no limit) (yes|no)$")
_ATTR = re.compile(r"^'(.+)' (?:in \w+ yes|not on the page no)$")
_OPTION = re.compile(r"^option '(.+)' (selected yes|not selected no)$")


def _number(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def parse_purchase_checks(text: str) -> PurchaseClaims | None:
    """The claims of a purchase rationale in the ``"check"`` style (the inverse of the teacher's writer);
    None when ``text`` has no ``Checks:`` list. Checks that do not parse are left out."""
    if "Checks: " not in text:
        return None
    body = text.split("Checks: ", 1)[1]
    body, _, tail = body.partition(" checks pass")
    body = body.rsplit(" ", 1)[0] if re.search(r" \d+/\d+$", body) else body
    claims = PurchaseClaims()
    verdict = re.search(r"the reward is ([01])\.", tail)
    claims.reward = int(verdict.group(1)) if verdict else None
    checks, _, type_part = body.partition("; type: ")
    verdict_of_type = type_part.rstrip(". ")
    if verdict_of_type.endswith(" yes"):
        claims.type_ok = True
    elif re.search(r" no(?: \(type factor [\d.]+\))?$", verdict_of_type):
        claims.type_ok = False
    for check in checks.split("; "):
        if m := _PRICE.match(check):
            claims.price, claims.cap, claims.price_ok = (
                _number(m.group(1)),
                _number(m.group(2)),
                m.group(3) == "yes",
            )
        elif m := _OPTION.match(check):
            claims.options[m.group(1)] = m.group(2) == "selected yes"
        elif m := _ATTR.match(check):
            claims.attributes[m.group(1)] = check.endswith(" yes")
    return claims
