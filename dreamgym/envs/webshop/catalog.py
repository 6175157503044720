"""Load WebShop product files in the upstream schema, with the upstream load rules.

Files (in ``data_dir``; each may also be gzip-compressed as ``<name>.gz``):

- ``items_shuffle.json`` (or ``items_shuffle_1000.json``): a JSON list of product dicts with ``asin``,
  ``name``, ``full_description``, ``small_description``, ``pricing``, ``images``,
  ``customization_options``, ``category``, ``query``, ``product_category``.
- ``items_ins_v2.json`` (or ``items_ins_v2_1000.json``): ``{asin: {"attributes": [...],
  "instruction"?: str, "instruction_attributes"?: [...]}}``.
- ``items_human_ins.json``: ``{asin: [{"instruction", "instruction_attributes",
  "instruction_options"}, ...]}`` (needed only for human goals).
- ``splits.json`` (dreamgym's addition, optional): ``{"by": "asin", "train": [...], "val": [...],
  "test": [...]}``.

Load rules (upstream ``engine.load_products``): rows whose ``asin`` is ``'nan'`` or longer than 10 chars
are skipped, later duplicates are skipped; ``pricing`` is split on ``$``, non-digit/non-dot characters
are stripped and at most two floats are kept (empty or missing -> ``[100.0]``); the display price is
``$X`` or ``$X to $Y`` with Python float formatting; option names are lower-cased and values stripped,
lower-cased, with ``/`` replaced by `` | ``; ``small_description`` becomes a list; ``query`` is
lower-cased and stripped; ``Attributes`` come from ``items_ins_v2`` (``['DUMMY_ATTR']`` if absent).

Hidden price: one number per ASIN, the single price or uniform between the first two. Upstream draws it
with the global ``random`` in load order; we draw it from ``random.Random("webshop-price:<ASIN>")`` so it
does not depend on load order or on other code using ``random`` (same distribution, reproducible).

Any malformed record raises :class:`CatalogError` naming the file, the record (index and asin) and the
field. Loaded catalogs are cached per resolved directory (:func:`load_catalog`).
"""

from __future__ import annotations

import gzip
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Product", "Catalog", "CatalogError", "load_catalog", "default_data_dir", "parse_pricing"]

_PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
_ATTR_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
_HUMAN_FILE = "items_human_ins.json"
_SPLITS_FILE = "splits.json"


class CatalogError(ValueError):
    """A WebShop data file does not follow the upstream schema."""


@dataclass
class Product:
    """One loaded product (upstream's cleaned product dict, typed).

    Attributes:
        asin: upper-case product id as in the file (actions use it lower-cased).
        title: ``name``.
        description: ``full_description``.
        bullets: ``small_description`` as a list.
        price_tag: display price, ``$X`` or ``$X to $Y``.
        prices: the parsed prices (one or two floats).
        price: hidden numeric price used by the reward.
        options: option name -> list of values (lower-cased).
        attributes: product attributes from ``items_ins_v2`` (``['DUMMY_ATTR']`` if absent).
        category: top-level scrape category.
        query: scrape search term (lower-cased).
        product_category: breadcrumb with `` › `` separators.
        main_image: first image URL or ``None``.
    """

    asin: str
    title: str
    description: str
    bullets: list[str]
    price_tag: str
    prices: list[float]
    price: float
    options: dict[str, list[str]]
    attributes: list[str]
    category: str
    query: str
    product_category: str
    main_image: str | None = None


_T = TypeVar("_T")


@dataclass
class Catalog:
    """All products of one data directory plus the instruction sources and splits."""

    data_dir: str
    products: dict[str, Product]
    ins_v2: dict[str, dict[str, Any]]
    human_ins: dict[str, list[dict[str, Any]]] | None
    splits: dict[str, list[str]] | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)  # see memo

    def __len__(self) -> int:
        return len(self.products)

    def memo(self, key: str, build: Callable[[], _T]) -> _T:
        """The value kept on this catalog under ``key``, made by ``build()`` on first use (what is derived
        once per catalog and shared by every env over it: the search engine, the goals and their splits)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def get(self, asin: str) -> Product | None:
        """The product with ``asin`` (any case), or ``None``."""
        return self.products.get(asin.upper())


def default_data_dir() -> Path:
    """The bundled catalog directory (``dreamgym/data/webshop``)."""
    return Path(__file__).resolve().parents[2] / "data" / "webshop"


def _find(data_dir: Path, names: tuple[str, ...], required: bool) -> Path | None:
    for name in names:
        for cand in (data_dir / name, data_dir / f"{name}.gz"):
            if cand.exists():
                return cand
    if required:
        raise CatalogError(
            f"no WebShop data file {' or '.join(names)} (or .gz) in {str(data_dir)!r}; pass data_dir= a "
            "directory with the upstream files, or None for the bundled catalog"
        )
    return None


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def parse_pricing(pricing: Any) -> tuple[list[float], str]:
    """Upstream price parse: ``"$24.49 - $39.99"`` -> ``([24.49, 39.99], "$24.49 to $39.99")``.

    Raises:
        ValueError: if a ``$`` amount has no number in it.
    """
    if not pricing:
        return [100.0], "$100.0"
    parts = [re.sub(r"[^\d.]", "", p) for p in str(pricing).split("$")[1:]]
    if not parts:
        return [100.0], "$100.0"
    prices = [float(p) for p in parts][:2]
    tag = f"${prices[0]}" if len(prices) == 1 else f"${prices[0]} to ${prices[1]}"
    return prices, tag


def _hidden_price(asin: str, prices: list[float]) -> float:
    if len(prices) == 1:
        return prices[0]
    return random.Random(f"webshop-price:{asin}").uniform(prices[0], prices[1])


def _err(path: Path, i: int, asin: Any, fld: str, msg: str) -> CatalogError:
    return CatalogError(f"{path}: record {i} (asin {asin!r}): field '{fld}' {msg}")


def _options(path: Path, i: int, asin: str, raw: Any) -> dict[str, list[str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _err(
            path, i, asin, "customization_options", f"must be an object or null, got {type(raw).__name__}"
        )
    out: dict[str, list[str]] = {}
    for name, values in raw.items():
        if not isinstance(values, list):
            raise _err(
                path, i, asin, f"customization_options.{name}", "must be a list of {value, image} objects"
            )
        vals = []
        for j, v in enumerate(values):
            if not isinstance(v, dict) or not isinstance(v.get("value"), str):
                raise _err(
                    path,
                    i,
                    asin,
                    f"customization_options.{name}[{j}].value",
                    f"must be a string, got {v!r:.60}",
                )
            vals.append(v["value"].strip().lower().replace("/", " | "))
        out[name.lower()] = vals
    return out


def _product(path: Path, i: int, d: Any, attrs: dict[str, dict[str, Any]]) -> Product | None:
    if not isinstance(d, dict):
        raise CatalogError(f"{path}: record {i}: expected a product object, got {type(d).__name__}")
    asin = d.get("asin")
    if not isinstance(asin, str):
        raise _err(path, i, asin, "asin", f"must be a string, got {type(asin).__name__}")
    if asin == "nan" or len(asin) > 10:
        return None
    for key in ("name", "full_description", "category", "query", "product_category"):
        if d.get(key) is not None and not isinstance(d.get(key), str):
            raise _err(path, i, asin, key, f"must be a string, got {type(d.get(key)).__name__}")
    if not isinstance(d.get("name"), str):
        raise _err(path, i, asin, "name", "is missing; every product needs a title")
    bullets = d.get("small_description") or []
    if isinstance(bullets, str):
        bullets = [bullets]
    if not isinstance(bullets, list) or not all(isinstance(b, str) for b in bullets):
        raise _err(path, i, asin, "small_description", "must be a string or a list of strings")
    if d.get("pricing") is not None and not isinstance(d.get("pricing"), str):
        raise _err(
            path, i, asin, "pricing", f"must be a string like '$24.49 - $39.99', got {d.get('pricing')!r:.40}"
        )
    try:
        prices, tag = parse_pricing(d.get("pricing"))
    except ValueError:
        raise _err(path, i, asin, "pricing", f"has no number after a '$': {d.get('pricing')!r:.60}") from None
    images = d.get("images") or []
    rec = attrs.get(asin)
    attributes = list(rec.get("attributes") or []) if rec else ["DUMMY_ATTR"]
    return Product(
        asin=asin,
        title=d["name"],
        description=d.get("full_description") or "",
        bullets=list(bullets),
        price_tag=tag,
        prices=prices,
        price=_hidden_price(asin, prices),
        options=_options(path, i, asin, d.get("customization_options")),
        attributes=attributes,
        category=d.get("category") or "",
        query=(d.get("query") or "").lower().strip(),
        product_category=d.get("product_category") or "",
        main_image=images[0] if isinstance(images, list) and images else None,
    )


def _check_attrs(path: Path, raw: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: expected an object mapping asin -> record, got {type(raw).__name__}")
    for i, (asin, rec) in enumerate(raw.items()):
        if not isinstance(rec, dict):
            raise CatalogError(
                f"{path}: record {i} (asin {asin!r}): expected an object, got {type(rec).__name__}"
            )
        a = rec.get("attributes", [])
        if not isinstance(a, list) or not all(isinstance(x, str) for x in a):
            raise _err(path, i, asin, "attributes", "must be a list of strings")
        if rec.get("instruction") is not None and not isinstance(rec["instruction"], str):
            raise _err(path, i, asin, "instruction", "must be a string or null")
        ia = rec.get("instruction_attributes", [])
        if not isinstance(ia, list) or not all(isinstance(x, str) for x in ia):
            raise _err(path, i, asin, "instruction_attributes", "must be a list of strings")
    return raw


def _check_human(path: Path, raw: Any) -> dict[str, list[dict[str, Any]]]:
    if not isinstance(raw, dict):
        raise CatalogError(
            f"{path}: expected an object mapping asin -> list of instructions, got {type(raw).__name__}"
        )
    for i, (asin, recs) in enumerate(raw.items()):
        if not isinstance(recs, list):
            raise CatalogError(f"{path}: record {i} (asin {asin!r}): expected a list of instruction objects")
        for j, r in enumerate(recs):
            where = f"{path}: record {i} (asin {asin!r}), instruction {j}"
            if not isinstance(r, dict):
                raise CatalogError(f"{where}: expected an object, got {type(r).__name__}")
            if not isinstance(r.get("instruction"), str):
                raise CatalogError(
                    f"{where}: field 'instruction' must be a string, got {r.get('instruction')!r:.40}"
                )
            for key in ("instruction_attributes", "instruction_options"):
                v = r.get(key, [])
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise CatalogError(f"{where}: field '{key}' must be a list of strings, got {v!r:.60}")
    return raw


def _load(data_dir: Path, num_products: int | None) -> Catalog:
    ppath = _find(data_dir, _PRODUCT_FILES, True)
    apath = _find(data_dir, _ATTR_FILES, True)
    attrs = _check_attrs(apath, _read_json(apath))
    raw = _read_json(ppath)
    if not isinstance(raw, list):
        raise CatalogError(f"{ppath}: expected a JSON list of products, got {type(raw).__name__}")
    if num_products is not None:
        raw = raw[:num_products]
    products: dict[str, Product] = {}
    for i, d in enumerate(raw):
        p = _product(ppath, i, d, attrs)
        if p is not None and p.asin not in products:
            products[p.asin] = p
    hpath = _find(data_dir, (_HUMAN_FILE,), False)
    human = _check_human(hpath, _read_json(hpath)) if hpath else None
    spath = _find(data_dir, (_SPLITS_FILE,), False)
    splits = None
    if spath:
        s = _read_json(spath)
        bad = [
            k
            for k in ("train", "val", "test")
            if not isinstance(s.get(k) if isinstance(s, dict) else None, list)
        ]
        if bad:
            raise CatalogError(f"{spath}: field(s) {bad} must be lists of ASINs (and 'by' must be 'asin')")
        splits = {k: [a.upper() for a in s[k]] for k in ("train", "val", "test")}
    return Catalog(str(data_dir), products, attrs, human, splits)


_CACHE: dict[tuple[str, int | None], Catalog] = {}
_LOCK = threading.Lock()


def load_catalog(data_dir: str | Path | None = None, num_products: int | None = None) -> Catalog:
    """Load (once per process; cached per resolved directory) the catalog in ``data_dir``.

    Args:
        data_dir: directory with the upstream files; ``None`` for the bundled catalog.
        num_products: keep only the first N product rows (upstream ``num_products``).

    Raises:
        CatalogError: naming the file, record and field of the first malformed record.
    """
    path = Path(data_dir).expanduser().resolve() if data_dir is not None else default_data_dir()
    key = (str(path), num_products)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _load(path, num_products)
        return _CACHE[key]
