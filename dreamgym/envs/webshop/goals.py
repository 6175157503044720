"""WebShop goals, built the upstream way (``engine/goal.py``), and their train/val/test splits.

- **Human goals**: one per ``items_human_ins`` record whose ``instruction_attributes`` is non-empty;
  ``instruction_text`` = instruction stripped of leading/trailing ``.`` + the price clause;
  ``goal_options`` is the list ``instruction_options``.
- **Synthetic goals**: for each product whose ``items_ins_v2`` record has an ``instruction``, one goal
  per combination of its option values (cartesian product over option names in sorted order);
  text = instruction + ``" with name: value, and name: value"`` + price clause; ``goal_options`` is a
  dict; ``weight`` = mean over the goal's attributes of 1 / (number of goals with that attribute).
- **price_upper**: take the first four values of 10, 20, ..., 990 strictly above the hidden price,
  sample two without replacement and keep the larger; the text ``", and price lower than X.XX
  dollars"`` is appended. Fewer than two candidates: ``price_upper = 1000000`` and no text.
  Upstream samples with the global ``random`` in load order; we use ``random.Random("webshop-goal:" +
  goal_id)`` so a goal's price cap does not depend on the order goals are built in.
- **Order**: goals are shuffled with ``random.Random(233)`` (upstream seeds the global random with 233).
- **Splits**: with a ``splits.json`` (``by: asin``), a goal belongs to the split of its target product,
  so test products never appear in train goals; without one, the upstream index rule applies
  (test = goals[:500], val = goals[500:1500], train = the rest; for fewer than 2,000 goals:
  the first 20% / next 20% / rest).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field

from dreamgym.envs.webshop.catalog import Catalog

__all__ = [
    "Goal",
    "PRICE_RANGE",
    "price_upper",
    "human_goals",
    "synthetic_goals",
    "build_goals",
    "split_goals",
]

PRICE_RANGE = [10.0 * i for i in range(1, 100)]


@dataclass
class Goal:
    """One shopping task.

    Attributes:
        goal_id: stable id (``<ASIN>-h<k>`` human, ``<ASIN>-s<k>`` synthetic); the task id.
        asin: the product the instruction was written for.
        instruction_text: the instruction shown to the agent (with the price clause).
        attributes: goal attributes (reward terms).
        goal_options: option values (list, human goals) or name -> value (dict, synthetic goals).
        price_upper: price cap.
        category, query, name, product_category: copied from the target product (type reward).
        weight: sampling weight.
    """

    goal_id: str
    asin: str
    instruction_text: str
    attributes: list[str]
    goal_options: list[str] | dict[str, str]
    price_upper: float
    category: str = ""
    query: str = ""
    name: str = ""
    product_category: str = ""
    weight: float = 1.0
    extra: dict = field(default_factory=dict)

    def option_values(self) -> list[str]:
        """The goal's option values as a list (for dict goals, the values)."""
        return (
            list(self.goal_options.values())
            if isinstance(self.goal_options, dict)
            else list(self.goal_options)
        )


def price_upper(price: float, rng: random.Random) -> tuple[float, str]:
    """Upstream price cap for a product of hidden ``price`` -> ``(price_upper, text)``."""
    cands = [p for p in PRICE_RANGE if p > price][:4]
    if len(cands) < 2:
        return 1000000.0, ""
    cap = max(rng.sample(cands, 2))
    return cap, f", and price lower than {cap:.2f} dollars"


def _base(catalog: Catalog, asin: str) -> dict:
    p = catalog.products[asin]
    return {
        "asin": asin,
        "category": p.category,
        "query": p.query,
        "name": p.title,
        "product_category": p.product_category,
    }


def human_goals(catalog: Catalog) -> list[Goal]:
    """Goals from ``items_human_ins`` (unshuffled; see :func:`build_goals`)."""
    if catalog.human_ins is None:
        raise ValueError(
            f"human_goals=True needs items_human_ins.json in {catalog.data_dir!r}; add it or use human_goals=False"
        )
    goals = []
    for asin, recs in catalog.human_ins.items():
        if asin.upper() not in catalog.products:
            continue
        asin = asin.upper()
        for k, r in enumerate(recs):
            if not r.get("instruction_attributes"):
                continue
            gid = f"{asin}-h{k}"
            cap, text = price_upper(catalog.products[asin].price, random.Random(f"webshop-goal:{gid}"))
            goals.append(
                Goal(
                    gid,
                    instruction_text=r["instruction"].strip(".") + text,
                    attributes=list(r["instruction_attributes"]),
                    goal_options=list(r.get("instruction_options") or []),
                    price_upper=cap,
                    **_base(catalog, asin),
                )
            )
    return goals


def synthetic_goals(catalog: Catalog) -> list[Goal]:
    """Goals from ``items_ins_v2`` instructions x option combinations (unshuffled)."""
    goals = []
    for asin, p in catalog.products.items():
        rec = catalog.ins_v2.get(asin) or {}
        if rec.get("instruction") is None:
            continue
        names = sorted(p.options)
        combos = list(itertools.product(*[p.options[n] for n in names])) if names else [()]
        for k, combo in enumerate(combos):
            gid = f"{asin}-s{k}"
            opts = dict(zip(names, combo, strict=False))
            text = rec["instruction"]
            if opts:
                text += " with " + ", and ".join(f"{n}: {v}" for n, v in opts.items())
            cap, ptxt = price_upper(p.price, random.Random(f"webshop-goal:{gid}"))
            goals.append(
                Goal(
                    gid,
                    instruction_text=text + ptxt,
                    attributes=list(rec.get("instruction_attributes") or []),
                    goal_options=opts,
                    price_upper=cap,
                    **_base(catalog, asin),
                )
            )
    counts = Counter(a for g in goals for a in g.attributes)
    for g in goals:
        if g.attributes:
            g.weight = sum(1.0 / counts[a] for a in g.attributes) / len(g.attributes)
    return goals


def build_goals(catalog: Catalog, human: bool = True) -> list[Goal]:
    """All goals of ``catalog`` (human or synthetic), shuffled with seed 233; cached on the catalog."""
    return catalog.memo(
        f"goals:{human}", lambda: _shuffled(human_goals(catalog) if human else synthetic_goals(catalog))
    )


def split_goals(catalog: Catalog, human: bool = True) -> dict[str, list[Goal]]:
    """``{"train", "val", "test"}`` -> goals, by target product (splits.json) or by upstream index."""
    return catalog.memo(f"splits:{human}", lambda: _split(build_goals(catalog, human), catalog.splits))


def _shuffled(goals: list[Goal]) -> list[Goal]:
    random.Random(233).shuffle(goals)
    return goals


def _split(goals: list[Goal], splits: dict[str, list[str]] | None) -> dict[str, list[Goal]]:
    """``goals`` by the split of their target product (``splits``), or by upstream index without it."""
    if splits is not None:
        where = {a: s for s, asins in splits.items() for a in asins}
        return {s: [g for g in goals if where.get(g.asin, "train") == s] for s in ("train", "val", "test")}
    n = len(goals)
    a, b = (500, 1500) if n >= 2000 else (n // 5, 2 * n // 5)
    return {"test": goals[:a], "val": goals[a:b], "train": goals[b:]}
