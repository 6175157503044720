"""WebShop's grounding: the synthetic env's steps answered from recorded pages (:mod:`dreamgym.envs.grounding`).

WebShop's next state is a function of the page and the action, and the abstract page shows almost all of
it (:mod:`.pages`). From the record's real pages alone (never the catalog, the search engine or the
reward function) this answers:

=====================================  ==========================================================  ========
step                                   next state                                                  kind
=====================================  ==========================================================  ========
``search[q]``                          the recorded results page of query ``q``, page 1            read
``click[next >]`` / ``click[< prev]``  the recorded results page of the same query, page +-1       read
  on a results page
``click[<asin>]`` on a results page    the product's recorded item page, no option selected        read
``click[description]`` (features,      the product's recorded sub-page                             read
  reviews, attributes) on an item page
``click[<option>]`` on an item page    the same page with the option selected in its group         composed
``click[< prev]`` on an item page      the episode's last results page (its query and page)        composed
``click[< prev]`` on a sub-page        the episode's last item page (its selections kept)          composed
``click[back to search]``              the search page                                             composed
``click[buy now]`` on a recorded       the done page; reward and score read from a recorded         read /
  item page                            purchase of the same task, product and options, else the     reward
                                       experience model's (or judge's) verdict on the real page
``click[buy now]`` on a page the       the done page, score 0, ``sim_error`` (pays nothing)         void
  model wrote
=====================================  ==========================================================  ========

The item page carries the reward's facts (price paid, category, attributes: :func:`.pages.item_fact_lines`),
so the verdict of a ``reward`` step sees what decides it. A results page the record lacks (a new query, a
page further on) is written by the model and :meth:`WebShopGrounding.constrain` rewrites it onto the record:
its header is the query and page the action implies, and each product line becomes a recorded product
that has a recorded item page: the same ASIN where the model copied one, else, nearest in words to what the
model wrote, one of the products the record's results pages showed for the recorded queries closest in
words to this one (analysed as the search engine analyses text: stems, no stop words), so every click
leads to a recorded page, every purchase is of a recorded product, and the products listed are those real
searches for similar words listed.

With ``unrecorded="search"`` (:meth:`WebShopGrounding.compose`) the model does not write such a page at
all: it is composed as WebShop renders one, ranked by :meth:`WebShopGrounding.search`, BM25 with the real
engine's analysis over what the record shows of each product (title, attributes, option values, recorded
description and first feature bullet), the record's stand-in for the search engine it never reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dreamgym.envs.grounding import Answer, Grounding
from dreamgym.envs.webshop.pages import SELECTED, SUB_PAGES, parse_action
from dreamgym.envs.webshop.search import PRODUCT_WINDOW, SEARCH_RETURN_N, BM25Index, analyze
from dreamgym.schema import Transition

__all__ = ["WebShopGrounding", "page_of", "strip_selection", "select_option", "done_page", "chosen_options"]

SEARCH_PAGE = "[page] search\n[search box]"
_RESULTS = re.compile(r"^\[page\] results \| query: (.*) \| page (\d+) \| total results: (\d+)$")
_PAGE = re.compile(r"^\[page\] ([a-z]+) \| ([a-z0-9]+)$")
_WORD = re.compile(r"[a-z0-9]+")


def page_of(state: str) -> tuple[str, ...]:
    """What page ``state`` is: ``("results", query, page)``, ``(kind, asin)`` for an item or sub-page,
    ``("search",)``, ``("done",)``, or ``()`` when its first line is none of these."""
    first = state.split("\n", 1)[0].strip()
    if m := _RESULTS.match(first):
        return ("results", m.group(1), int(m.group(2)))
    if m := _PAGE.match(first):
        return (m.group(1), m.group(2))
    if first in ("[page] search", "[page] done"):
        return (first[len("[page] ") :],)
    return ()


def _option_values(line: str) -> tuple[str, list[str]]:
    """``"[option size] s ; m (selected)"`` -> ``("size", ["s", "m (selected)"])``."""
    head, _, values = line.partition("] ")
    return head[len("[option ") :], values.split(" ; ")


def _unmark(value: str) -> str:
    return value[: -len(SELECTED)] if value.endswith(SELECTED) else value


def strip_selection(state: str) -> str:
    """An item page with no option selected (the page a click on its product shows)."""
    lines = state.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("[option "):
            name, values = _option_values(line)
            lines[i] = f"[option {name}] " + " ; ".join(_unmark(v) for v in values)
    return "\n".join(lines)


def selected(state: str) -> dict[str, str]:
    """The options an item page shows selected, ``{group: value}`` in page order."""
    out = {}
    for line in state.split("\n"):
        if line.startswith("[option "):
            name, values = _option_values(line)
            chosen = [_unmark(v) for v in values if v.endswith(SELECTED)]
            if chosen:
                out[name] = chosen[0]
    return out


def select_option(state: str, value: str) -> str | None:
    """Item page ``state`` after ``click[value]``: ``value`` selected in the first group listing it (the
    group's other value unselected), as WebShop renders it; None if no group lists it."""
    lines = state.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("[option "):
            continue
        name, values = _option_values(line)
        plain = [_unmark(v) for v in values]
        if value in [p.lower() for p in plain]:
            marked = [p + (SELECTED if p.lower() == value else "") for p in plain]
            lines[i] = f"[option {name}] " + " ; ".join(marked)
            return "\n".join(lines)
    return None


def done_page(asin: str, options: dict[str, str], score: float) -> str:
    """The done page of buying ``asin`` with ``options`` (in the order they were first chosen)."""
    opts = " ; ".join(f"{k}: {v}" for k, v in options.items()) or "none"
    return "\n".join(
        [
            "[page] done",
            "[text] thank you for shopping with us!",
            f"[purchased] {asin} | options: {opts}",
            f"[score] {score:.4f}",
        ]
    )


def chosen_options(states: Sequence[str], actions: Sequence[str]) -> dict[str, str]:
    """The options of the item the episode is on, in the order their groups were first chosen (WebShop's
    session keeps them in a dict: a second choice in a group keeps the group's place)."""
    opts: dict[str, str] = {}
    for before, action, after in zip(states, actions, states[1:], strict=False):
        page, nxt = page_of(before), page_of(after)
        if nxt[:1] != ("item",) and nxt[:1] not in [(s,) for s in SUB_PAGES]:
            opts = {}  # a search, a results page, the search page: the session's options are cleared
        elif page[:1] == ("results",):
            opts = {}  # a product opened from results starts with none
        elif page[:1] == ("item",) and nxt[:1] == ("item",):
            parsed = parse_action(action)
            value = parsed[1] if parsed else ""
            for name, v in selected(after).items():
                if v.lower() == value:
                    opts[name] = v
    return opts


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class WebShopGrounding(Grounding):
    """WebShop's steps answered from recorded pages (module docstring).

    Args:
        search_attributes: whether the record's search (:meth:`search`) indexes each product's item-page
            attribute line besides the fields the real engine indexes. True (the default, what the long
            suite's DreamGym arms played): more words for products whose description the record lacks;
            False: exactly the real engine's fields where the record shows them, which agrees better with
            the real results pages (BENCHMARKS.md, closed-loop fidelity: on the 3,000-step warm start's
            held-out searches page-1 cover 0.82 -> 0.90, top-1 0.70 -> 0.80).
    """

    def __init__(self, search_attributes: bool = True) -> None:
        super().__init__()
        self.search_attributes = search_attributes
        self._reset()

    def _reset(self) -> None:
        self.results: dict[tuple[str, int], str] = {}  # (query, page) -> results page
        self.items: dict[str, str] = {}  # asin -> item page, no option selected
        self.subs: dict[tuple[str, str], str] = {}  # (sub-page, asin) -> page
        self.products: dict[str, str] = {}  # asin -> its results line, "[product] asin | title | price"
        self.purchases: dict[tuple[str, str, frozenset], Transition] = {}  # (task, asin, options) -> step
        self._titles: dict[str, set[str]] | None = None  # words of each groundable product's line, lazily
        self._search: BM25Index | None = None  # the record's search index (:meth:`search`), lazily
        self.query_words: dict[str, frozenset[str]] = {}  # recorded query -> its analysed words

    def _page(self, state: str) -> None:
        page = page_of(state)
        if page[:1] == ("results",):
            self.results.setdefault((page[1], page[2]), state)
            if page[1] not in self.query_words:
                self.query_words[page[1]] = frozenset(analyze(page[1]))
            for line in state.split("\n"):
                if line.startswith("[product] "):
                    asin = line[len("[product] ") :].split(" | ", 1)[0].strip()
                    if asin not in self.products:
                        self.products[asin] = line
                        self._titles = self._search = None
        elif page[:1] == ("item",):
            if page[1] not in self.items:
                self.items[page[1]] = strip_selection(state)
                self._titles = self._search = None
        elif len(page) == 2 and page[0] in SUB_PAGES:
            if (page[0], page[1]) not in self.subs:
                self.subs[(page[0], page[1])] = state
                self._search = None

    def _index(self, t: Transition) -> None:
        self._page(t.state)
        self._page(t.next_state)
        page = page_of(t.state)
        if t.action.strip() == "click[buy now]" and page[:1] == ("item",) and t.done:
            key = (t.task_id, page[1], frozenset(selected(t.state).items()))
            self.purchases.setdefault(key, t)

    # ------------------------------------------------------------------ answering
    def recorded_item(self, state: str) -> bool:
        """Whether item page ``state`` is a recorded product's page (with any selection)."""
        page = page_of(state)
        return page[:1] == ("item",) and self.items.get(page[1]) == strip_selection(state)

    def answer(
        self, task_id: str, states: Sequence[str], actions: Sequence[str], action: str
    ) -> Answer | None:
        parsed = parse_action(action)
        if parsed is None or not states:
            return None
        name, arg = parsed
        cur = states[-1]
        page = page_of(cur)
        if name == "search":
            text = self.results.get((" ".join(arg.split(" ")), 1))
            return Answer("read", text) if text is not None else None
        if arg == "back to search":
            return Answer("composed", SEARCH_PAGE)
        kind = page[:1]
        if kind == ("results",):
            if arg in ("next >", "< prev"):
                text = self.results.get((page[1], page[2] + (1 if arg == "next >" else -1)))
                return Answer("read", text) if text is not None else None
            text = self.items.get(arg)
            return Answer("read", text) if text is not None else None
        if kind == ("item",):
            return self._item_step(task_id, states, actions, page[1], arg)
        if len(page) == 2 and page[0] in SUB_PAGES and arg == "< prev":
            last = next((s for s in reversed(states[:-1]) if page_of(s) == ("item", page[1])), None)
            return Answer("composed", last) if last is not None else None
        return None

    def _item_step(
        self, task_id: str, states: Sequence[str], actions: Sequence[str], asin: str, arg: str
    ) -> Answer | None:
        cur = states[-1]
        if arg == "buy now":
            opts = chosen_options(states, actions)
            if not self.recorded_item(cur):
                return Answer("void", done_page(asin, opts, 0.0), done=True)
            t = self.purchases.get((task_id, asin, frozenset(selected(cur).items())))
            if t is not None:
                return Answer(
                    "read", done_page(asin, opts, float(t.score)), float(t.reward), float(t.score), True
                )
            return Answer("reward", done_page(asin, opts, 0.0), done=True)
        if arg == "< prev":
            last = next((s for s in reversed(states[:-1]) if page_of(s)[:1] == ("results",)), None)
            return Answer("composed", last) if last is not None else None
        if arg in SUB_PAGES:
            text = self.subs.get((arg, asin))
            return Answer("read", text) if text is not None else None
        text = select_option(cur, arg)
        return Answer("composed", text) if text is not None else None

    def with_score(self, next_state: str, score: float) -> str:
        """A done page with its ``[score]`` line set to ``score`` (a ``reward`` answer, once paid)."""
        lines = next_state.split("\n")
        return "\n".join(f"[score] {score:.4f}" if ln.startswith("[score] ") else ln for ln in lines)

    def can_end(self, states: Sequence[str], action: str) -> bool:
        """WebShop ends an episode only at ``click[buy now]`` on an item page."""
        return bool(states) and page_of(states[-1])[:1] == ("item",) and action.strip() == "click[buy now]"

    # ------------------------------------------------------------------ composing (unrecorded="search")
    def record_document(self, asin: str) -> str:
        """What the record shows of ``asin`` among the fields the real search indexes (title, description,
        first feature bullet, option values; :func:`.search.product_document`): its results line's title, and
        where recorded its item page's options, its description page's text and its features page's first
        bullet; with ``search_attributes``, also its item page's attribute line (not a field the real search
        indexes)."""
        parts = [self.products[asin].split(" | ")[1] if " | " in self.products.get(asin, "") else ""]
        for line in self.items.get(asin, "").split("\n"):
            if line.startswith("[option "):
                name, values = _option_values(line)
                parts.append(f"{name}: " + ", ".join(_unmark(v) for v in values))
            elif line.startswith("[attributes] ") and self.search_attributes:
                parts.append(line[len("[attributes] ") :].replace(" ; ", " "))
        for line in self.subs.get(("description", asin), "").split("\n"):
            if line.startswith("[text] "):
                parts.append(line[len("[text] ") :])
        bullets = [
            ln for ln in self.subs.get(("features", asin), "").split("\n") if ln.startswith("[bullet] ")
        ]
        parts += [bullets[0][len("[bullet] ") :]] if bullets else []
        return " ".join(parts).lower()

    def search(self, query: str) -> list[str]:
        """The recorded products a search for ``query`` ranks first (at most 50, best first): BM25 with the
        real engine's analysis and parameters over :meth:`record_document` of every product the record's
        results pages listed (ties in record order). The record's stand-in for the real search engine."""
        if self._search is None:
            asins = list(self.products)
            self._search = BM25Index(asins, [self.record_document(a) for a in asins])
        return self._search.search(query, SEARCH_RETURN_N)

    def compose(self, states: Sequence[str], action: str) -> Answer | None:
        """A results page the record lacks (a search for a new query, ``next >`` / ``< prev`` to a page it
        never showed), composed as WebShop renders one from :meth:`search`'s ranking of recorded products:
        the header with the query, page and number of hits, and the page's ten recorded results lines.
        None for any other step."""
        target = self._results_target(states, action)
        if target is None or target[1] < 1:
            return None
        query, num = target
        hits = self.search(query)
        head = [
            f"[page] results | query: {query} | page {num} | total results: {len(hits)}",
            "[button] back to search",
        ]
        head += ["[button] < prev"] if num > 1 else []
        window = hits[(num - 1) * PRODUCT_WINDOW : num * PRODUCT_WINDOW]
        return Answer("composed", "\n".join([*head, "[button] next >", *(self.products[a] for a in window)]))

    # ------------------------------------------------------------------ constraining
    def constrain(self, states: Sequence[str], action: str, next_state: str) -> tuple[str, int]:
        """A written next state of a step that shows a results page (a search, ``next >`` / ``< prev`` on
        results) rebuilt as that page: the header says the action's query and page, and each written
        product line is a recorded product with a recorded item page (module docstring). Other states are
        returned unchanged. Returns the page and the number of product lines replaced or dropped."""
        target = self._results_target(states, action)
        if target is None:
            return next_state, 0
        query, num = target
        written = [ln.strip() for ln in next_state.split("\n") if ln.strip().startswith("[product] ")]
        lines, changed = [], 0
        used: set[str] = set()
        pool = self.similar_products(query)
        for ln in written[:PRODUCT_WINDOW]:
            asin = ln[len("[product] ") :].split(" | ", 1)[0].strip()
            if asin in self.items and asin in self.products and asin not in used:
                pick = asin
            else:
                pick, changed = self._nearest(ln, used, pool), changed + 1
            if pick is not None:
                used.add(pick)
                lines.append(self.products[pick])
        changed += max(len(written) - PRODUCT_WINDOW, 0)
        m = _RESULTS.match(next_state.split("\n", 1)[0].strip())
        total = max(int(m.group(3)) if m else 0, (num - 1) * PRODUCT_WINDOW + len(lines))
        head = [
            f"[page] results | query: {query} | page {num} | total results: {total}",
            "[button] back to search",
        ]
        head += ["[button] < prev"] if num > 1 else []
        return "\n".join([*head, "[button] next >", *lines]), changed

    def _results_target(self, states: Sequence[str], action: str) -> tuple[str, int] | None:
        parsed = parse_action(action)
        if parsed is None:
            return None
        name, arg = parsed
        if name == "search":
            return " ".join(arg.split(" ")), 1
        page = page_of(states[-1]) if states else ()
        if page[:1] == ("results",) and arg in ("next >", "< prev"):
            return page[1], page[2] + (1 if arg == "next >" else -1)
        return None

    def similar_products(self, query: str, queries: int = 5) -> list[str]:
        """The groundable products (recorded line and item page) the record's results pages listed for the
        ``queries`` recorded queries sharing the most analysed words with ``query`` (Jaccard; ties in
        record order), in the order those pages listed them, most similar query first."""
        want = frozenset(analyze(query))
        sims = sorted(
            ((len(want & w) / max(len(want | w), 1), q) for q, w in self.query_words.items() if want & w),
            key=lambda x: -x[0],
        )
        out: dict[str, None] = {}
        for _, q in sims[:queries]:
            n = 1
            while (page := self.results.get((q, n))) is not None:
                for line in page.split("\n"):
                    asin = (
                        line[len("[product] ") :].split(" | ", 1)[0].strip()
                        if line.startswith("[product] ")
                        else ""
                    )
                    if asin in self.items and asin in self.products:
                        out.setdefault(asin, None)
                n += 1
        return list(out)

    def _nearest(self, line: str, used: set[str], pool: Sequence[str] = ()) -> str | None:
        """The groundable product (recorded line and item page) of ``pool`` (empty or used up: of all of them)
        whose line shares the most words with ``line`` (Jaccard), other than ``used`` ones; None if none."""
        if self._titles is None:
            self._titles = {a: _words(ln) for a, ln in self.products.items() if a in self.items}
        want = _words(line.split(" | ", 1)[-1])
        best, best_sim = None, -1.0
        choices = [a for a in pool if a not in used] or list(self._titles)
        for asin in choices:
            words = self._titles[asin]
            if asin in used:
                continue
            sim = len(want & words) / max(len(want | words), 1)
            if sim > best_sim:
                best, best_sim = asin, sim
        return best
