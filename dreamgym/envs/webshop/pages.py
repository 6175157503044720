"""WebShop pages: the page model, action parsing, transitions and the two renderings.

THE abstract textual state format (the paper's "cleaned page elements"; defined here and only here).
One element per line, ``[kind] text``; the first line names the page::

    search page             results page                              item page
    -----------             ------------                              ---------
    [page] search           [page] results | query: <kw> | page 2 | total results: 50
    [search box]            [button] back to search                   [page] item | b09gkfnqwt
                            [button] < prev          (page > 1 only)  [button] back to search
                            [button] next >          (always)         [button] < prev
                            [product] b09gkfnqwt | <title> | <price>  [title] <title>
                            ... (up to 10 products)                   [price] $27.10 (listed as $24.49 to $39.99)
                                                                      [rating] N.A.
                                                                      [category] pet supplies › cats
                                                                      [attributes] low dust ; clumping
    sub-page (description | features | reviews | attributes)          [option color] black ; purple (selected)
    [page] description | b09gkfnqwt                                   [option size] 6.5 ; 7
    [button] back to search                                           [button] description
    [button] < prev                                                   [button] features
    [text] <description>  | [bullet] <b> per bullet |                [button] reviews
    [text] no reviews     | [attribute] <a> per attribute             [button] attributes (show_attrs only)
                                                                      [button] buy now
    done page
    [page] done
    [text] thank you for shopping with us!
    [purchased] b09gkfnqwt | options: color: blue ; size: large     ("options: none" if none)
    [score] 0.6667

The item page shows what decides the purchase reward (:func:`item_fact_lines`): the price the
reward compares with the cap (upstream hides it behind the listed range), the category breadcrumb and
the product's attribute list. ``facts=False`` renders the older item page with only the listed price.

ASINs are lower-cased (as clicked). Option values of one group are separated by `` ; `` (values may
contain `` | ``: upstream turns ``/`` into `` | ``); the selected one carries `` (selected)``.

Available actions (:func:`available_actions`): ``search[<query>]`` when the search box is shown, then
``click[x]`` for every clickable in upstream document order: the buttons (``back to search``,
``< prev``, ``next >``, ``description``, ``features``, ``reviews``, ``attributes``, ``buy now``), the
product links (lower-cased ASINs), the option values; duplicates dropped. The start page's ``search``
button is not listed: upstream ignores ``click[search]``. :func:`infer_available_actions` recovers the
same list from the abstract text alone.

The upstream ``text`` observation (:func:`render_text`) joins the visible text nodes with ``" [SEP] "``
exactly as WebShop's templates render (spec section 2.3).

Action parsing (:func:`parse_action`): regex ``(.+)\\[(.+)\\]`` (greedy: everything up to the last ``]``
is the argument), argument lower-cased. ``search[kw]`` runs on any page (as upstream; the special
prefixes ``<r>``, ``<c> category``, ``<q> query`` of :meth:`SearchEngine.search` work too); ``click[x]``
only for a current clickable other than ``search``; anything else is a no-op flagged invalid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from dreamgym.envs.webshop.catalog import Catalog, Product
from dreamgym.envs.webshop.search import PRODUCT_WINDOW, SearchEngine

__all__ = [
    "SUB_PAGES",
    "BUTTONS",
    "PageState",
    "PageTransition",
    "parse_action",
    "clickables",
    "available_actions",
    "actions_of_clickables",
    "check_action",
    "apply_action",
    "render_abstract",
    "item_fact_lines",
    "render_text",
    "infer_available_actions",
    "SEARCH_ACTION",
]

SUB_PAGES = ("description", "features", "reviews", "attributes")
BUTTONS = ("back to search", "< prev", "next >", "buy now", *SUB_PAGES)
"""Every button :func:`clickables` can list; its other clickables are products and options."""
SEARCH_ACTION = "search[<query>]"
SELECTED = " (selected)"
_ACTION_RE = re.compile(r"(.+)\[(.+)\]")


@dataclass
class PageState:
    """Where one session is: the page kind and the session (keywords, results, page, item, options).

    Attributes:
        kind: "search", "results", "item", one of ``SUB_PAGES``, or "done".
        keywords: lower-cased search keywords of the current results.
        results: ASINs of all (<= 50) results of the current search.
        page: results page number (1-based).
        asin: the open product (item/sub/done pages).
        options: selected option name -> value.
        score: purchase score (done page).
    """

    kind: str = "search"
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    page: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    score: float | None = None

    def page_results(self) -> list[str]:
        """ASINs shown on the current results page."""
        lo = (self.page - 1) * PRODUCT_WINDOW
        return self.results[lo : lo + PRODUCT_WINDOW]


@dataclass
class PageTransition:
    """The outcome of one action on a page."""

    page: PageState
    valid: bool
    kind: str  # "search" | "click" | "invalid"
    target: str = ""  # search keywords or clicked element
    reason: str = ""  # why an action was invalid
    bought: bool = False
    selected: tuple[str, str] | None = None  # (option name, value) when an option was clicked


def parse_action(action: str) -> tuple[str, str] | None:
    """``"click[Buy Now]"`` -> ``("click", "buy now")``; ``None`` if it does not match the syntax."""
    m = _ACTION_RE.match(action.strip())
    if m is None:
        return None
    return m.group(1).strip(), m.group(2).lower()


def clickables(page: PageState, catalog: Catalog, show_attrs: bool = False) -> list[str]:
    """Upstream clickables of ``page`` in document order (lower-cased), de-duplicated."""
    if page.kind == "search":
        return ["search"]
    if page.kind == "done":
        return []
    out = ["back to search"]
    if page.kind == "results":
        if page.page > 1:
            out.append("< prev")
        out.append("next >")
        out += [a.lower() for a in page.page_results()]
    elif page.kind == "item":
        p = catalog.products[page.asin]
        out += ["< prev", "description", "features", "reviews"] + (["attributes"] if show_attrs else [])
        out.append("buy now")
        out += [v for vals in p.options.values() for v in vals]
    else:
        out.append("< prev")
    return list(dict.fromkeys(out))


def available_actions(page: PageState, catalog: Catalog, show_attrs: bool = False) -> list[str]:
    """The action strings listed for ``page`` (module docstring)."""
    return actions_of_clickables(page.kind == "search", clickables(page, catalog, show_attrs))


def actions_of_clickables(has_search_bar: bool, clicks: list[str]) -> list[str]:
    """The action strings listed for a page with upstream's ``get_available_actions()`` result
    ``{"has_search_bar", "clickables"}``: ``search[<query>]`` if it has the search bar, then
    ``click[x]`` per clickable other than ``search``."""
    return ([SEARCH_ACTION] if has_search_bar else []) + [f"click[{c}]" for c in clicks if c != "search"]


def _option_name(product: Product, value: str) -> str:
    return next(n for n, vals in product.options.items() if value in vals)


def check_action(action: str, clicks: Collection[str], done: bool = False) -> tuple[str, str, str]:
    """THE validity rule of WebShop actions: ``(name, arg, reason)``, ``reason == ""`` when valid.

    ``search[<any non-empty argument>]`` is valid on every page but the done page (upstream runs it
    anywhere, ``search[ ]`` included); ``click[x]`` when ``x`` is one of ``clicks`` (lower-cased
    clickables) other than ``search``; anything else is invalid. Names are case-sensitive as upstream's
    (``CLICK[buy now]`` is invalid); the argument is lower-cased.
    """
    parsed = parse_action(action)
    if parsed is None:
        return "", "", "it does not match the syntax search[...] or click[...]"
    name, arg = parsed
    if done:
        return name, arg, "the episode is over (the item was bought)"
    if name == "search":
        return name, arg, ""
    if name != "click":
        return name, arg, f"'{name}' is not an action (use search or click)"
    if arg == "search" or arg not in clicks:
        return name, arg, f"'{arg}' is not clickable on this page"
    return name, arg, ""


def apply_action(
    page: PageState, action: str, catalog: Catalog, engine: SearchEngine, show_attrs: bool = False
) -> PageTransition:
    """Apply ``action`` to ``page`` with upstream semantics; never raises (invalid -> no-op)."""
    clicks = clickables(page, catalog, show_attrs) if page.kind != "done" else []
    name, arg, reason = check_action(action, clicks, done=page.kind == "done")
    if reason:
        return PageTransition(page, False, "invalid", arg, reason=reason)
    if name == "search":
        kw = " ".join(arg.split(" "))  # upstream: any non-empty argument runs (whitespace finds nothing)
        return PageTransition(PageState("results", kw, engine.search(kw), 1), True, "search", kw)
    if arg == "back to search":
        return PageTransition(PageState("search"), True, "click", arg)
    if arg == "buy now":
        return PageTransition(replace(page, kind="done"), True, "click", arg, bought=True)
    if page.kind == "results":
        if arg in ("next >", "< prev"):
            step = 1 if arg == "next >" else -1
            return PageTransition(replace(page, page=page.page + step, options={}), True, "click", arg)
        return PageTransition(replace(page, kind="item", asin=arg.upper(), options={}), True, "click", arg)
    if arg == "< prev":  # item -> results (same page, options cleared); sub-page -> item
        if page.kind == "item":
            return PageTransition(replace(page, kind="results", asin=None, options={}), True, "click", arg)
        return PageTransition(replace(page, kind="item"), True, "click", arg)
    if arg in SUB_PAGES:
        return PageTransition(replace(page, kind=arg), True, "click", arg)
    product = catalog.products[page.asin]
    opt = _option_name(product, arg)
    return PageTransition(
        replace(page, options={**page.options, opt: arg}), True, "click", arg, selected=(opt, arg)
    )


# ------------------------------------------------------------------------------------------ rendering
def item_fact_lines(product: Product) -> list[str]:
    """The item page's reward-relevant facts: the price paid, the category and the attribute list.

    ``[price] $27.10 (listed as $24.49 to $39.99)`` shows the hidden price the reward compares with the
    cap (the listed range alone cannot decide a cap inside it); ``[category] a › b`` the breadcrumb the
    reward's type factor compares; ``[attributes] a ; b`` the attributes the reward matches goal
    attributes against (no line for ``DUMMY_ATTR``). The price line comes first (it replaces the listed
    price); the others follow the rating.
    """
    price = f"${product.price:.2f}"
    if len(product.prices) > 1:
        price += f" (listed as {product.price_tag})"
    lines = [f"[price] {price}"]
    lines += [f"[category] {product.product_category}"] if product.product_category else []
    attrs = [a for a in product.attributes if a != "DUMMY_ATTR"]
    return lines + ([f"[attributes] {' ; '.join(attrs)}"] if attrs else [])


def _abstract_lines(page: PageState, catalog: Catalog, show_attrs: bool, facts: bool) -> list[str]:
    if page.kind == "search":
        return ["[page] search", "[search box]"]
    if page.kind == "done":
        opts = " ; ".join(f"{k}: {v}" for k, v in page.options.items()) or "none"
        return [
            "[page] done",
            "[text] thank you for shopping with us!",
            f"[purchased] {page.asin.lower()} | options: {opts}",
            f"[score] {page.score or 0.0:.4f}",
        ]
    if page.kind == "results":
        lines = [
            f"[page] results | query: {page.keywords} | page {page.page} | total results: {len(page.results)}",
            "[button] back to search",
        ]
        lines += ["[button] < prev"] if page.page > 1 else []
        lines.append("[button] next >")
        for a in page.page_results():
            p = catalog.products[a]
            lines.append(f"[product] {a.lower()} | {p.title} | {p.price_tag}")
        return lines
    p = catalog.products[page.asin]
    lines = [f"[page] {page.kind} | {p.asin.lower()}", "[button] back to search", "[button] < prev"]
    if page.kind == "item":
        lines.append(f"[title] {p.title}")
        lines += item_fact_lines(p)[:1] if facts else [f"[price] {p.price_tag}"]
        lines.append("[rating] N.A.")
        lines += item_fact_lines(p)[1:] if facts else []
        for name, vals in p.options.items():
            shown = [v + (SELECTED if page.options.get(name) == v else "") for v in vals]
            lines.append(f"[option {name}] " + " ; ".join(shown))
        buttons = (
            ["description", "features", "reviews"] + (["attributes"] if show_attrs else []) + ["buy now"]
        )
        lines += [f"[button] {b}" for b in buttons]
    elif page.kind == "description":
        lines.append(f"[text] {p.description}")
    elif page.kind == "features":
        lines += [f"[bullet] {b}" for b in p.bullets]
    elif page.kind == "reviews":
        lines.append("[text] no reviews")
    else:
        lines += [f"[attribute] {a}" for a in p.attributes]
    return lines


def render_abstract(page: PageState, catalog: Catalog, show_attrs: bool = False, facts: bool = True) -> str:
    """The abstract textual state of ``page`` (module docstring); ``facts=False``: the item page without
    :func:`item_fact_lines` (only the listed price; the state before the observability change)."""
    return "\n".join(_abstract_lines(page, catalog, show_attrs, facts))


def _tojson(options: dict[str, str]) -> str:
    s = json.dumps(options, sort_keys=True)  # Flask's tojson: sorted keys, HTML-safe escapes
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")


def render_text(page: PageState, catalog: Catalog, instruction: str, show_attrs: bool = False) -> str:
    """Upstream ``observation_mode="text"`` rendering (visible text nodes joined by ``" [SEP] "``)."""
    if page.kind == "search":
        segs = ["WebShop", "Instruction:", instruction, "Search"]
    elif page.kind == "done":
        segs = [
            "Thank you for shopping with us!",
            "Your code:",
            "None",
            "(Paste it in your MTurk interface.)",
            "Purchased",
            "asin",
            page.asin,
            "options",
            _tojson(page.options),
            "attrs",
            "None",
            "category",
            "None",
            "query",
            "None",
            "product category",
            "None",
            "Target",
            "asin",
            "options",
            "attrs",
            "price upper",
            "instuction text",
            "category",
            "product category",
            "query",
            "Goal",
            "None",
            "Reward",
            "Your score (min 0.0, max 1.0)",
            str(float(page.score or 0.0)),
            "Reward Details",
            "None",
        ]
    elif page.kind == "results":
        segs = [
            "Instruction:",
            instruction,
            "Back to Search",
            f"Page {page.page} (Total results: {len(page.results)})",
        ]
        segs += ["< Prev"] if page.page > 1 else []
        segs.append("Next >")
        for a in page.page_results():
            p = catalog.products[a]
            segs += [a, p.title, p.price_tag]
    else:
        p = catalog.products[page.asin]
        segs = ["Instruction:", instruction, "Back to Search", "< Prev"]
        if page.kind == "item":
            for name, vals in p.options.items():
                segs += [name, *vals]
            segs += [p.title, f"Price: {p.price_tag}", "Rating: N.A.", "Description", "Features", "Reviews"]
            segs += (["Attributes"] if show_attrs else []) + ["Buy Now"]
        elif page.kind == "description":
            segs.append(p.description)
        elif page.kind == "features":
            segs += p.bullets
        elif page.kind == "attributes":
            segs += [*p.attributes, p.category, p.query, p.product_category]
    return " [SEP] ".join(s.strip() for s in segs if s and s.strip())


def infer_available_actions(state: str) -> list[str]:
    """Parse an abstract state back into its available actions; tolerant of malformed text (never raises)."""
    try:
        search, buttons, products, options = False, [], [], []
        for raw in str(state).splitlines():
            line = raw.strip()
            if line.startswith("[search box]"):
                search = True
            elif line.startswith("[button] "):
                buttons.append(line[len("[button] ") :].strip().lower())
            elif line.startswith("[product] "):
                products.append(line[len("[product] ") :].split(" | ")[0].strip().lower())
            elif line.startswith("[option ") and "] " in line:
                for v in line.split("] ", 1)[1].rstrip(" ;").split(" ; "):
                    v = v.strip()
                    v = v[: -len(SELECTED)].rstrip() if v.endswith(SELECTED) else v
                    options.append(v.lower())
        clicks = [c for c in dict.fromkeys(buttons + products + options) if c and c != "search"]
        return ([SEARCH_ACTION] if search else []) + [f"click[{c}]" for c in clicks]
    except Exception:  # noqa: BLE001 - must never raise on model-written text
        return []
