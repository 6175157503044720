"""WebShop's scripted agents: the oracle expert, the visible-text shopper (``non_oracle``) and the
near-miss oracle (``near_miss``), registered by name in :mod:`dreamgym.agents`."""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz

from dreamgym.agents import PRICE_CLAUSE, Agent
from dreamgym.envs.webshop.checks import listed_products, price_cap

__all__ = [
    "WebShopExpert",
    "VisibleTextAgent",
    "visible_scores",
    "NearMissAgent",
    "NEAR_MISS_MODES",
    "make_webshop_expert",
    "make_visible_text_agent",
    "make_near_miss_agent",
]


class WebShopExpert(Agent):
    """Oracle for WebShop: knows the goal's product, searches with varied wording, finds it, buys it.

    Queries vary over episodes: the full instruction, the instruction without the price clause, the
    goal's query + attributes, or the product's title. It pages to the target if it is on a later
    results page, re-searches with the exact title if it is not in the results, sometimes opens a listed
    distractor first (and goes back), sometimes looks at a sub-page, selects the goal's options and buys.

    Args:
        subpage_prob: chance of viewing a sub-page (description/features/reviews) before buying.
        detour_prob: chance of opening another listed product first and going back.
        seed: seed of the episode's choices.
    """

    def __init__(self, subpage_prob: float = 0.25, detour_prob: float = 0.15, seed: int | None = None):
        self.subpage_prob = subpage_prob
        self.detour_prob = detour_prob
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.searches = 0
        self.viewed_sub = self.rng.random() >= self.subpage_prob  # True: skip the sub-page
        self.detoured = self.rng.random() >= self.detour_prob  # True: no look at another product first

    def _query(self, goal: dict[str, Any]) -> str:
        if self.searches > 0:  # fallback: the exact title finds the product
            return goal["name"].lower()
        instr = PRICE_CLAUSE.sub("", goal["instruction"].lower())
        attrs = " ".join(goal["attributes"][: self.rng.randint(1, 2)])
        options = goal["options"].values() if isinstance(goal["options"], dict) else goal["options"]
        choices = [
            goal["instruction"].lower(),
            instr,
            f"{goal['query']} {attrs}".strip(),
            f"{attrs} {goal['query']} {' '.join(options)}".strip(),
            goal["name"].lower(),
        ]
        return self.rng.choices(choices, weights=[3, 3, 2, 2, 1])[0]

    @staticmethod
    def _wanted_options(goal: dict[str, Any], product_options: dict[str, list[str]]) -> dict[str, str]:
        """Option name -> value to select: exact name/value if present, else the closest value (> 85)."""
        goal_opts = goal["options"]
        pairs = list(goal_opts.items()) if isinstance(goal_opts, dict) else [(None, v) for v in goal_opts]
        want: dict[str, str] = {}
        for gname, v in pairs:
            if gname in product_options and v in product_options[gname]:
                want[gname] = v
                continue
            scored = [
                (100.0 if pv == v else fuzz.token_set_ratio(pv, v), name, pv)
                for name, vals in product_options.items()
                if name not in want
                for pv in vals
            ]
            if scored:
                s, name, pv = max(scored, key=lambda x: x[0])
                if s > 85:
                    want[name] = pv
        return want

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        goal, page = info["goal"], info["page"]
        target = goal["asin"].lower()
        if page == "search":
            q = self._query(goal)
            self.searches += 1
            return f"search[{q}]"
        if page == "results":
            rank = info.get("target_rank")
            if rank is None:
                return "click[back to search]"
            want_page = (rank - 1) // 10 + 1
            if want_page > info["page_num"]:
                return "click[next >]"
            if want_page < info["page_num"]:
                return "click[< prev]"
            if not self.detoured:  # look at a listed distractor first, then come back
                self.detoured = True
                others = [x["asin"].lower() for x in info.get("shown", []) if x["asin"].lower() != target]
                if others:
                    return f"click[{self.rng.choice(others)}]"
            return f"click[{target}]"
        if page in ("description", "features", "reviews", "attributes"):
            return "click[< prev]"
        if page == "item":
            if (info.get("asin") or "").lower() != target:
                return "click[< prev]"
            if not self.viewed_sub:
                self.viewed_sub = True
                return f"click[{self.rng.choice(['description', 'features', 'reviews'])}]"
            want = self._wanted_options(goal, info.get("product_options") or {})
            for name, v in want.items():
                if info["options"].get(name) != v:
                    return f"click[{v}]"
            return "click[buy now]"
        return "click[back to search]"


_STOP = frozenset(
    "a an and are as at be but by can do for from find get help i i'm im in is it looking me my need of on "
    "or please some that the this to want which with would you".split()
)


def _content_words(text: str) -> set[str]:
    """Lower-cased alphanumeric words of ``text`` without common instruction filler words."""
    return set(re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())) - _STOP


def _names_value(text: str, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` as whole words (``large`` is not in ``x-large``, ``8`` not in ``8.5``)."""
    return re.search(rf"(?<![\w'\-.]){re.escape(value)}(?![\w'\-]|\.\d)", text) is not None


def _parse_options(lines: list[str]) -> list[tuple[list[str], str | None]]:
    """Item-page option groups in page order: ``(values, selected value or None)`` each."""
    groups = []
    for line in lines:
        if not (line.startswith("[option ") and "] " in line):
            continue
        values, selected = [], None
        for v in line.split("] ", 1)[1].split(" ; "):
            v = v.strip()
            if v.endswith(" (selected)"):
                v = v[: -len(" (selected)")]
                selected = v
            values.append(v)
        groups.append((values, selected))
    return groups


def visible_scores(
    instruction: str, products: list[tuple[str, str, list[float]]]
) -> list[tuple[bool, int, int]]:
    """What the visible text says about each listed product (``listed_products`` of a results page), as
    a sort key, larger is better: within the instruction's price cap (when it states one), content words
    shared between the instruction (without its price clause) and the title, earlier in the list."""
    words, cap = _content_words(PRICE_CLAUSE.sub("", instruction.lower())), price_cap(instruction)
    return [
        (cap is None or (bool(prices) and min(prices) <= cap), len(words & _content_words(title)), -i)
        for i, (_, title, prices) in enumerate(products)
    ]


class VisibleTextAgent(Agent):
    """A WebShop heuristic that acts from the visible abstract state only (it never reads ``info``).

    It searches the instruction without its price clause; on a results page it opens the listed product
    whose title shares the most content words with the instruction (ties: the first listed), ranking
    products whose lowest listed price is within the instruction's ``price lower than X dollars`` cap
    first when it states one; on the item page it clicks, per option group, the longest value that the
    instruction names as whole words (unless already selected), then buys. Sub-pages are left with
    ``< prev``. Needs ``observation_mode="abstract"`` (see :mod:`dreamgym.envs.webshop.pages`).

    Args:
        second_prob: chance per episode of opening the second-best product instead of the best.
        next_page_prob: chance per episode of paging once to ``next >`` before choosing.
        seed: seed of the episode's choices.
    """

    def __init__(self, second_prob: float = 0.2, next_page_prob: float = 0.1, seed: int | None = None):
        self.second_prob = second_prob
        self.next_page_prob = next_page_prob
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.take_second = self.rng.random() < self.second_prob
        self.paged = self.rng.random() >= self.next_page_prob  # True: no paging

    def act(self, obs: Any, info: Any = None) -> str:
        lines = [line.strip() for line in str(obs.observation).splitlines()]
        kind = lines[0].split(" | ")[0].removeprefix("[page] ") if lines else ""
        actions = list(obs.available_actions)
        if kind == "search":
            return f"search[{PRICE_CLAUSE.sub('', obs.instruction.lower()).strip(' .')}]"
        if kind == "results":
            return self._results(obs.instruction, lines, actions)
        if kind == "item":
            return self._item(obs.instruction.lower(), lines)
        if "click[< prev]" in actions:  # a sub-page
            return "click[< prev]"
        return "click[back to search]"

    def _results(self, instruction: str, lines: list[str], actions: list[str]) -> str:
        """Page once if drawn, else open the best (or, if drawn, second-best) listed product."""
        products = listed_products("\n".join(lines))
        if not self.paged and "click[next >]" in actions:
            self.paged = True
            return "click[next >]"
        if not products:
            return "click[< prev]" if "click[< prev]" in actions else "click[back to search]"
        scored = visible_scores(instruction, products)
        ranked = sorted(range(len(products)), key=lambda i: scored[i], reverse=True)
        pick = ranked[1] if self.take_second and len(ranked) > 1 else ranked[0]
        return f"click[{products[pick][0]}]"

    @staticmethod
    def _item(instruction: str, lines: list[str]) -> str:
        """Click the first named option value that is not selected yet; buy when none is left."""
        for values, selected in _parse_options(lines):
            named = [v for v in values if _names_value(instruction, v)]
            if named:
                want = max(named, key=len)
                if want != selected:
                    return f"click[{want}]"
        return "click[buy now]"


NEAR_MISS_MODES = ("wrong_option", "over_price", "too_early", "look_alike")
"""The mistakes of :class:`NearMissAgent` (``wrong_option`` / ``too_early`` on the target's item page,
``over_price`` / ``look_alike`` by opening another listed product)."""


class NearMissAgent(WebShopExpert):
    """The WebShop oracle, committing one deliberate mistake per episode so that its purchase fails.

    Modes (one drawn per episode from ``modes``; :attr:`mode` is the one being committed):

    - ``wrong_option``: buys the target with one goal option replaced by another value of its group that
      does not fuzzy-match the goal's (probability 0.75 when one exists), else with that group unselected;
    - ``too_early``: buys the target before selecting any option;
    - ``over_price``: buys a listed product of the goal's type (``type_ok``) priced above the cap;
    - ``look_alike``: buys a listed non-target product of the goal's type that misses a goal attribute
      (preferred) or option value, preferring ones within the price cap; goal options are selected.

    Among equally ranked listed products the choice is random.

    ``over_price`` and ``look_alike`` look at up to ``max_pages`` results pages. A mode that is impossible
    in the episode (the goal has no options, no such product is listed) falls back to the other modes of
    ``modes``, then to the remaining :data:`NEAR_MISS_MODES`, in a seeded order; if none is possible the
    agent buys like the expert (``mode == "expert"``, a success).

    Args:
        modes: the modes to draw from (e.g. ``("over_price",)`` to force one).
        max_pages: results pages searched for an ``over_price`` / ``look_alike`` product.
        subpage_prob, detour_prob: as :class:`WebShopExpert` (lower defaults leave steps for the mistake).
        seed: seed of the episode's choices.

    Raises:
        ValueError: if ``modes`` is empty or names an unknown mode.
    """

    def __init__(
        self,
        modes: tuple[str, ...] = NEAR_MISS_MODES,
        max_pages: int = 2,
        subpage_prob: float = 0.15,
        detour_prob: float = 0.1,
        seed: int | None = None,
    ):
        unknown = [m for m in modes if m not in NEAR_MISS_MODES]
        if not modes or unknown:
            raise ValueError(f"modes must be a non-empty subset of {NEAR_MISS_MODES}; got {modes!r}")
        self.modes = tuple(modes)
        self.max_pages = max_pages
        super().__init__(subpage_prob=subpage_prob, detour_prob=detour_prob, seed=seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        rest = [m for m in NEAR_MISS_MODES if m not in self.modes]
        self.pending = self.rng.sample(self.modes, len(self.modes)) + self.rng.sample(rest, len(rest))
        self.mode = self.pending.pop(0)
        self.pick: str | None = None  # the listed product chosen by over_price / look_alike
        self.want: dict[str, str] | None = None  # wrong_option: the options to select on the target
        self.checked_goal = False

    def _next_mode(self) -> None:
        """The current mode is impossible in this episode: switch to the next pending one."""
        self.mode = self.pending.pop(0) if self.pending else "expert"
        self.pick, self.want = None, None

    def _drop_option_modes(self) -> None:
        """Without goal options, ``wrong_option`` and ``too_early`` would buy a correct product."""
        self.pending = [m for m in self.pending if m not in ("wrong_option", "too_early")]
        if self.mode in ("wrong_option", "too_early"):
            self._next_mode()

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        goal = info["goal"]
        if not self.checked_goal:
            self.checked_goal = True
            if not goal["options"]:
                self._drop_option_modes()
        page = info["page"]
        while page == "results" and self.mode in ("over_price", "look_alike"):
            action = self._results(info)
            if action is not None:
                return action
        if page == "item":
            return self._item(obs, info)
        return super().act(obs, info)

    def _candidates(self, shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Listed products that commit the current results-page mistake, best first."""
        others = [s for s in shown if s["type_ok"] and not s["is_target"]]
        if self.mode == "over_price":
            return [s for s in others if not s["price_ok"]]
        misses = [s for s in others if s["attrs_missed"] or s["options_missing"]]
        return sorted(misses, key=self._rank)

    def _rank(self, shown: dict[str, Any]) -> tuple[bool, ...]:
        """Sort key of candidates (lower is better). ``look_alike``: a missed attribute first (a missing
        option value may still fuzzy-match the goal's), then within the price cap; ``over_price``: all equal.
        """
        if self.mode == "over_price":
            return ()
        return not shown["attrs_missed"], not shown["price_ok"]

    def _results(self, info: dict[str, Any]) -> str | None:
        """Open a mistaken product, or page on to find one; ``None`` after switching to another mode."""
        cands = self._candidates(info.get("shown", []))
        if cands:
            best = [c for c in cands if self._rank(c) == self._rank(cands[0])]
            self.pick = self.rng.choice(best)["asin"].lower()
            return f"click[{self.pick}]"
        if info["page_num"] < self.max_pages and info["num_results"] > info["page_num"] * len(info["shown"]):
            return "click[next >]"
        self._next_mode()
        return None

    def _item(self, obs: Any, info: dict[str, Any]) -> str:
        """On the item page: commit the mode's mistake, or go back to the results for another mode."""
        asin = (info.get("asin") or "").lower()
        if self.mode in ("over_price", "look_alike"):
            if asin != self.pick:
                return "click[< prev]"
            return self._buy(info, self._wanted_options(info["goal"], info.get("product_options") or {}))
        if asin != info["goal"]["asin"].lower() or self.mode == "expert":
            return super().act(obs, info)
        if self.mode == "too_early":
            return "click[buy now]"
        if self.want is None:
            self.want = self._wrong_options(info["goal"], info.get("product_options") or {})
            if self.want is None:
                self._next_mode()
                return self._item(obs, info)
        return self._buy(info, self.want)

    @staticmethod
    def _buy(info: dict[str, Any], want: dict[str, str]) -> str:
        """Select ``want`` (option name -> value) one click at a time, then buy."""
        for name, v in want.items():
            if info["options"].get(name) != v:
                return f"click[{v}]"
        return "click[buy now]"

    def _wrong_options(
        self, goal: dict[str, Any], product_options: dict[str, list[str]]
    ) -> dict[str, str] | None:
        """The goal's options with one group wrong (another value or unselected); ``None`` if none match."""
        from dreamgym.envs.webshop.reward import option_matches

        want = self._wanted_options(goal, product_options)
        if not want:
            return None
        name = self.rng.choice(sorted(want))
        others = [v for v in product_options[name] if not option_matches([v], goal["options"])[0]]
        if others and self.rng.random() < 0.75:
            want[name] = self.rng.choice(others)
        else:
            del want[name]
        return want


def make_webshop_expert(env: Any = None, **kwargs: Any) -> WebShopExpert:
    """The ``expert`` factory of :func:`dreamgym.agents.make_expert` (the env is not needed)."""
    return WebShopExpert(**kwargs)


def make_visible_text_agent(env: Any = None, **kwargs: Any) -> VisibleTextAgent:
    """The ``non_oracle`` factory of :func:`dreamgym.agents.make_agent`."""
    return VisibleTextAgent(**kwargs)


def make_near_miss_agent(env: Any = None, **kwargs: Any) -> NearMissAgent:
    """The ``near_miss`` factory of :func:`dreamgym.agents.make_agent`."""
    return NearMissAgent(**kwargs)
