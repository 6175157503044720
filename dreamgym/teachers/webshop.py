"""Rule-based WebShop teacher: a short, faithful rationale per transition from the env's privileged info.

It reads :meth:`dreamgym.envs.webshop.WebShopEnv.step_info` (goal, page, which shown products fit the
goal and why, the selected option, the reward breakdown, why an action was invalid) and writes 1-3
plain sentences, e.g. ``"Searching 'organic herbal tea' returns 50 results; page 1 lists 10, and 2 fit
the goal (b0z01bo0sc, b0aqcly8pg). The others miss attributes such as 'kosher'."``
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dreamgym.schema import Transition
from dreamgym.teachers.base import Teacher

__all__ = ["WebShopTeacher"]


def _q(items: list[str], n: int = 3) -> str:
    return ", ".join(f"'{x}'" for x in items[:n])


class WebShopTeacher(Teacher):
    """Explains WebShop transitions (see module docstring)."""

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
                info
            )
        target = info.get("target", "")
        prev, page = info.get("prev_page"), info.get("page")
        if info.get("bought"):
            return self._bought(info, t)
        if target == "back to search":
            return (
                "Back to search returns to the empty search page; the previous search and options are reset."
            )
        if page == "results":
            how = "Going back from the item page" if prev == "item" else f"Clicking '{target}'"
            note = " and the selected options are cleared" if prev == "item" else ""
            return f"{how} shows results page {info['page_num']} of the same search{note}. " + self._results(
                info
            )
        if info.get("selected"):
            name, value = info["selected"]
            return self._option(info, name, value)
        if page == "item" and prev in ("description", "features", "reviews", "attributes"):
            return (
                "Clicking '< prev' returns from the sub-page to the item page; the selected options are kept."
            )
        if page == "item":
            return self._opened(info)
        if page in ("description", "features", "reviews", "attributes"):
            what = {
                "description": "its description",
                "features": "its bullet points",
                "reviews": "its reviews (there are none)",
                "attributes": "its attribute list",
            }[page]
            return f"Clicking '{page}' shows {what}; the selected options are kept."
        return f"Clicking '{target}' leads to the {page} page."

    @staticmethod
    def _results(info: dict[str, Any]) -> str:
        shown = info.get("shown") or []
        if not shown:
            return "This page lists no products."
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

    @staticmethod
    def _option(info: dict[str, Any], name: str, value: str) -> str:
        goal_opts = info["goal"]["options"]
        vals = list(goal_opts.values()) if isinstance(goal_opts, dict) else list(goal_opts)
        s = f"Selecting '{value}' sets {name} to {value} on the same item page."
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
