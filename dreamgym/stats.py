"""Small statistics for comparing policies on the same held-out tasks.

Two policies evaluated on the same tasks give paired outcomes; the exact McNemar test looks only at the
discordant tasks (solved by one policy and not the other): under "no difference" each discordant task is
a fair coin, so with ``b`` tasks solved only by A and ``c`` only by B,

    p_one_sided = P[X >= b],  X ~ Binomial(b + c, 1/2)        (A better than B)
    p_two_sided = min(1, 2 * P[X >= max(b, c)])
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

__all__ = ["mcnemar_exact"]


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Exact McNemar test of policy A vs policy B on the same tasks (``a[i]``, ``b[i]``: task i solved).

    Returns:
        ``n``, ``success_a``, ``success_b``, ``only_a``, ``only_b``, ``p_one_sided`` (A better than B)
        and ``p_two_sided``.

    Raises:
        ValueError: if the two outcome lists differ in length (they must pair task by task).
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes must have the same length; got {len(a)} and {len(b)}")
    only_a = sum(bool(x) and not bool(y) for x, y in zip(a, b, strict=True))
    only_b = sum(bool(y) and not bool(x) for x, y in zip(a, b, strict=True))
    m = only_a + only_b

    def tail(k: int) -> float:  # P[X >= k], X ~ Bin(m, 1/2)
        return sum(comb(m, i) for i in range(k, m + 1)) / 2**m if m else 1.0

    n = max(len(a), 1)
    return {
        "n": float(len(a)),
        "success_a": sum(map(bool, a)) / n,
        "success_b": sum(map(bool, b)) / n,
        "only_a": float(only_a),
        "only_b": float(only_b),
        "p_one_sided": tail(only_a),
        "p_two_sided": min(1.0, 2 * tail(max(only_a, only_b))),
    }
