"""Small statistics for comparing policies on the same held-out tasks: one convention, two-sided exact tests.

Two policies evaluated on the same tasks give paired outcomes. The exact sign test looks only at the
tasks where they differ: under "no difference" each such task is a fair coin, so with ``b`` tasks where
A did better and ``c`` where B did,

    p_two_sided = min(1, 2 * P[X >= max(b, c)]),  X ~ Binomial(b + c, 1/2)

(1 when ``b + c == 0``). On success bits this is the exact McNemar test (the differing tasks are those
solved by one policy only); on a graded outcome (WebShop's purchase score, a task's success averaged over
seeds) it counts the tasks where one policy's outcome is higher. Every p this package reports is this
two-sided one; none is one-sided.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

__all__ = ["binomial_two_sided", "mcnemar_exact", "sign_test"]


def _tail(k: int, m: int) -> float:
    """``P[X >= k]``, ``X ~ Binomial(m, 1/2)`` (1 when ``m == 0``)."""
    return sum(comb(m, i) for i in range(k, m + 1)) / 2**m if m else 1.0


def binomial_two_sided(b: int, c: int) -> float:
    """Two-sided exact p of ``b`` against ``c`` discordant pairs: ``min(1, 2 * P[X >= max(b, c)])`` with
    ``X ~ Binomial(b + c, 1/2)``; 1 when ``b + c == 0``.

    Raises:
        ValueError: if a count is negative.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0; got b={b}, c={c}")
    return min(1.0, 2 * _tail(max(b, c), b + c))


def sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Two-sided exact paired sign test of policy A vs policy B on the same tasks (``a[i]``, ``b[i]``: task
    i's outcome): with ``higher_a`` tasks where A's outcome is higher and ``higher_b`` where B's is (ties
    carry no information and are dropped), ``p_two_sided = min(1, 2 * P[X >= max(higher_a, higher_b)])``,
    ``X ~ Binomial(higher_a + higher_b, 1/2)``.

    Returns:
        ``n``, ``mean_a``, ``mean_b``, ``higher_a``, ``higher_b`` and ``p_two_sided``.

    Raises:
        ValueError: if the two outcome lists differ in length (they must pair task by task).
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes must have the same length; got {len(a)} and {len(b)}")
    higher_a = sum(float(x) > float(y) for x, y in zip(a, b, strict=True))
    higher_b = sum(float(y) > float(x) for x, y in zip(a, b, strict=True))
    n = max(len(a), 1)
    return {
        "n": float(len(a)),
        "mean_a": sum(map(float, a)) / n,
        "mean_b": sum(map(float, b)) / n,
        "higher_a": float(higher_a),
        "higher_b": float(higher_b),
        "p_two_sided": binomial_two_sided(higher_a, higher_b),
    }


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Two-sided exact McNemar test of policy A vs policy B on the same tasks (``a[i]``, ``b[i]``: task i
    solved): :func:`sign_test` on success bits, ``p_two_sided = min(1, 2 * P[X >= max(only_a, only_b)])``,
    ``X ~ Binomial(only_a + only_b, 1/2)``.

    Returns:
        ``n``, ``success_a``, ``success_b``, ``only_a`` (tasks only A solved), ``only_b`` and ``p_two_sided``.

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
        "p_two_sided": t["p_two_sided"],
    }
