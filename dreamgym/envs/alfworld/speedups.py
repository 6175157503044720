"""Memoisation for TextWorld's PDDL engine, with outputs identical to stock.

Stock TextWorld 1.7.0 spends its time re-doing pure work:

* ``textgen._parse_and_convert`` re-parses (TatSu) each grammar template for every admissible
  command on every step;
* ``Rule.parse_conjunctive_query`` re-parses each grammar condition on every use;
* ``textgen.copy_context`` deep-copies the variable bindings (entity infos, placeholders) at every
  symbol of every derivation, though the derivation only reads them (shallow copies suffice);
* ``fast_downward.pddl2sas`` translates the PDDL problem to SAS (pure Python) at load *and* again at
  every reset, twice each time (plain and optimised translation);
* ``logic._parse_and_convert`` parses the whole ``alfred.twl2`` grammar (TatSu) for every game, though
  games differ only in the task sentence.

Two optional shortcuts keep observations and admissible commands identical but change internals:
:func:`no_replan_translation` makes the optimised translation (used only by ``replan``, i.e.
``policy_commands``, which dreamgym never requests) reuse the plain one, halving the load time.

:func:`install` wraps these functions with caches (returning deep copies where the caller mutates
the result), restores ``sys.argv`` that ``pddl2sas`` overwrites, and is idempotent; :func:`uninstall`
puts the stock functions back. ``tests/test_alfworld_env.py`` checks that observations and admissible
commands are the same with and without the caches.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["install", "uninstall", "installed", "stock", "clear_caches", "no_replan_translation"]

_ORIGINALS: dict[str, object] = {}
_PARSE_CACHE: dict[tuple, object] = {}
_QUERY_CACHE: dict[str, object] = {}
_SAS_CACHE: OrderedDict[tuple, tuple] = OrderedDict()
_SAS_CACHE_SIZE = 512
_LOGIC_CACHE: dict[str, tuple] = {}
_NO_REPLAN = [False]
_TASK_RE = re.compile(r'"rhs": "(Your task is to: [^"\\]*)"')


def _cached_parse_and_convert(*args, **kwargs):
    key = (args, tuple(sorted(kwargs.items())))
    try:
        hit = _PARSE_CACHE[key]
    except (KeyError, TypeError):
        hit = _ORIGINALS["parse"](*args, **kwargs)
        try:
            _PARSE_CACHE[key] = hit
        except TypeError:
            return hit
        hit = _PARSE_CACHE[key]
    return copy.deepcopy(hit)  # the grammar mutates symbols (context) during derivation


def _cached_query(expr: str):
    rule = _QUERY_CACHE.get(expr)
    if rule is None:
        rule = _QUERY_CACHE[expr] = _ORIGINALS["query"](expr)
    return rule


def _shallow_copy_context(context: dict) -> dict:
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _cached_logic_parse(text: str, *args, **kwargs):
    """Parse the grammar once per template; swap in this game's task sentence (same parser)."""
    m = _TASK_RE.search(text) if kwargs.get("rule_name") == "pddlStart" and not args else None
    if m is None:
        return _ORIGINALS["logic_parse"](text, *args, **kwargs)
    from textworld.envs.pddl.textgen import ContextSensitiveGrammar, ProductionRule

    template = text[: m.start(1)] + "Your task is to: UNKNOWN GOAL." + text[m.end(1) :]
    hit = _LOGIC_CACHE.get(template)
    if hit is None:
        hit = _LOGIC_CACHE[template] = _ORIGINALS["logic_parse"](template, *args, **kwargs)
    actions, grammar = hit
    rules = grammar._rules.get("task", [])
    if len(rules) != 1 or rules[0].weight != 1 or rules[0].condition:
        return _ORIGINALS["logic_parse"](text, *args, **kwargs)
    rhs = json.loads('"' + m.group(1) + '"')
    out = ContextSensitiveGrammar()
    out.update(grammar)
    out._rules["task"] = [ProductionRule(lhs="task", rhs=textgen_parse(rhs, rule_name="symbols"))]
    return dict(actions), out


def textgen_parse(*args, **kwargs):
    import textworld.envs.pddl.textgen as textgen

    return textgen._parse_and_convert(*args, **kwargs)


@contextmanager
def no_replan_translation() -> Iterator[None]:
    """Within the block, the optimised PDDL->SAS translation reuses the plain one (see module doc)."""
    old = _NO_REPLAN[0]
    _NO_REPLAN[0] = True
    try:
        yield
    finally:
        _NO_REPLAN[0] = old


def _cached_pddl2sas(domain: str, problem: str, verbose: bool = False, optimize=False):
    if optimize and _NO_REPLAN[0]:
        optimize = False
    key = (hashlib.sha1(domain.encode()).digest(), hashlib.sha1(problem.encode()).digest(), bool(optimize))
    hit = _SAS_CACHE.get(key)
    if hit is not None:
        _SAS_CACHE.move_to_end(key)
        return hit
    argv = list(sys.argv)
    try:
        hit = _ORIGINALS["pddl2sas"](domain, problem, verbose=verbose, optimize=optimize)
    finally:
        sys.argv = argv  # pddl2sas overwrites sys.argv
    _SAS_CACHE[key] = hit
    while len(_SAS_CACHE) > _SAS_CACHE_SIZE:
        _SAS_CACHE.popitem(last=False)
    return hit


def install() -> None:
    """Install the caches into TextWorld / fast-downward (idempotent)."""
    if _ORIGINALS:
        return
    import fast_downward
    import textworld.envs.pddl.logic as logic
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

    _ORIGINALS["logic_parse"] = logic._parse_and_convert
    _ORIGINALS["parse"] = textgen._parse_and_convert
    _ORIGINALS["pddl2sas"] = fast_downward.pddl2sas
    _ORIGINALS["copy_context"] = textgen.copy_context
    _ORIGINALS["query"] = Rule.parse_conjunctive_query  # bound classmethod
    _ORIGINALS["query_descr"] = Rule.__dict__["parse_conjunctive_query"]
    textgen._parse_and_convert = _cached_parse_and_convert
    textgen.copy_context = _shallow_copy_context
    logic._parse_and_convert = _cached_logic_parse
    Rule.parse_conjunctive_query = staticmethod(_cached_query)
    fast_downward.pddl2sas = _cached_pddl2sas


def uninstall() -> None:
    """Put the stock functions back (and keep the caches)."""
    if not _ORIGINALS:
        return
    import fast_downward
    import textworld.envs.pddl.logic as logic
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

    logic._parse_and_convert = _ORIGINALS["logic_parse"]
    textgen._parse_and_convert = _ORIGINALS["parse"]
    textgen.copy_context = _ORIGINALS["copy_context"]
    Rule.parse_conjunctive_query = _ORIGINALS["query_descr"]
    fast_downward.pddl2sas = _ORIGINALS["pddl2sas"]
    _ORIGINALS.clear()


def installed() -> bool:
    """Whether the caches are installed."""
    return bool(_ORIGINALS)


@contextmanager
def stock() -> Iterator[None]:
    """Run a block with stock TextWorld (caches removed), restoring the previous state after."""
    was = installed()
    uninstall()
    try:
        yield
    finally:
        if was:
            install()


def clear_caches() -> None:
    """Drop every cached parse and translation."""
    _PARSE_CACHE.clear()
    _QUERY_CACHE.clear()
    _SAS_CACHE.clear()
    _LOGIC_CACHE.clear()
