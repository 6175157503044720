"""Small statistics for comparing policies on the same held-out tasks.

Two policies evaluated on the same tasks give paired outcomes. The exact sign test looks only at the
tasks where they differ: under "no difference" each such task is a fair coin, so with ``b`` tasks where
A did better and ``c`` where B did,

    p_one_sided = P[X >= b],  X ~ Binomial(b + c, 1/2)        (A better than B)
    p_two_sided = min(1, 2 * P[X >= max(b, c)])

On success bits this is the exact McNemar test (the differing tasks are those solved by one policy only);
on a graded outcome (WebShop's purchase score) it counts the tasks where one policy scored higher.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

__all__ = ["mcnemar_exact", "sign_test"]


def _tail(k: int, m: int) -> float:
    """``P[X >= k]``, ``X ~ Binomial(m, 1/2)`` (1 when ``m == 0``)."""
    return sum(comb(m, i) for i in range(k, m + 1)) / 2**m if m else 1.0


def sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Exact paired sign test of policy A vs policy B on the same tasks (``a[i]``, ``b[i]``: task i's outcome).

    Returns:
        ``n``, ``mean_a``, ``mean_b``, ``higher_a`` (tasks where A's outcome is higher), ``higher_b``,
        ``p_one_sided`` (A better than B) and ``p_two_sided``; ties carry no information and are dropped.

    Raises:
        ValueError: if the two outcome lists differ in length (they must pair task by task).
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes must have the same length; got {len(a)} and {len(b)}")
    higher_a = sum(float(x) > float(y) for x, y in zip(a, b, strict=True))
    higher_b = sum(float(y) > float(x) for x, y in zip(a, b, strict=True))
    m, n = higher_a + higher_b, max(len(a), 1)
    return {
        "n": float(len(a)),
        "mean_a": sum(map(float, a)) / n,
        "mean_b": sum(map(float, b)) / n,
        "higher_a": float(higher_a),
        "higher_b": float(higher_b),
        "p_one_sided": _tail(higher_a, m),
        "p_two_sided": min(1.0, 2 * _tail(max(higher_a, higher_b), m)),
    }


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Exact McNemar test of policy A vs policy B on the same tasks (``a[i]``, ``b[i]``: task i solved):
    :func:`sign_test` on success bits.

    Returns:
        ``n``, ``success_a``, ``success_b``, ``only_a``, ``only_b``, ``p_one_sided`` (A better than B)
        and ``p_two_sided``.

    Raises:
        ValueError: if the two outcome lists differ in length (they must pair task by task).
    """
    t = sign_test([float(bool(x)) for x in a], [float(bool(y)) for y in b])
    return {
        "n": t["n"],
        "success_a": t["mean_a"],
        "success_b": t["mean_b"],
        "only_a": t["higher_a"],
        "only_b": t["higher_b"],
        "p_one_sided": t["p_one_sided"],
        "p_two_sided": t["p_two_sided"],
    }
