"""Memoisation for TextWorld's PDDL engine, with outputs identical to stock.

Stock TextWorld 1.7.0 spends its time re-doing pure work:

* ``textgen._parse_and_convert`` re-parses (TatSu) each grammar template for every admissible
  command on every step;
* ``Rule.parse_conjunctive_query`` re-parses each grammar condition on every use;
* ``textgen.copy_context`` deep-copies the variable bindings (entity infos, placeholders) at every
  symbol of every derivation, though the derivation only reads them (shallow copies suffice);
* ``fast_downward.pddl2sas`` translates the PDDL problem to SAS (pure Python) at load *and* again at
  every reset, twice each time (plain and optimised translation).

:func:`install` wraps these functions with caches (returning deep copies where the caller mutates
the result), restores ``sys.argv`` that ``pddl2sas`` overwrites, and is idempotent; :func:`uninstall`
puts the stock functions back. ``tests/test_alfworld_env.py`` checks that observations and admissible
commands are the same with and without the caches.
"""

from __future__ import annotations

import copy
import hashlib
import sys
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["install", "uninstall", "installed", "stock", "clear_caches"]

_ORIGINALS: dict[str, object] = {}
_PARSE_CACHE: dict[tuple, object] = {}
_QUERY_CACHE: dict[str, object] = {}
_SAS_CACHE: OrderedDict[tuple, tuple] = OrderedDict()
_SAS_CACHE_SIZE = 512


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


def _cached_pddl2sas(domain: str, problem: str, verbose: bool = False, optimize=False):
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
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

    _ORIGINALS["parse"] = textgen._parse_and_convert
    _ORIGINALS["pddl2sas"] = fast_downward.pddl2sas
    _ORIGINALS["copy_context"] = textgen.copy_context
    _ORIGINALS["query"] = Rule.parse_conjunctive_query  # bound classmethod
    _ORIGINALS["query_descr"] = Rule.__dict__["parse_conjunctive_query"]
    textgen._parse_and_convert = _cached_parse_and_convert
    textgen.copy_context = _shallow_copy_context
    Rule.parse_conjunctive_query = staticmethod(_cached_query)
    fast_downward.pddl2sas = _cached_pddl2sas


def uninstall() -> None:
    """Put the stock functions back (and keep the caches)."""
    if not _ORIGINALS:
        return
    import fast_downward
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

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
