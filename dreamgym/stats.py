"""Small statistics for comparing policies on the same held-out tasks: one convention, two-sided exact tests.

Two policies evaluated on the same tasks give paired outcomes. The exact sign test looks only at the
tasks where they differ: under "no difference" each such task is a fair coin, so with ``b`` tasks where
A did better and ``c`` where B did,

    p_two_sided = min(1, 2 * P[X >= max(b, c)]),  X ~ Binomial(b + c, 1/2)

(1 when ``b + c == 0``). On success bits this is the exact McNemar test (the differing tasks are those
solved by one policy only); on a graded outcome (WebShop's purchase score, a task's success averaged over
seeds) it counts the tasks where one policy's outcome is higher. Every p this package reports is this
two-sided one; none is one-sided.

Several records of one policy (seeds) against one record of another break the coin: a task's seed-mean is
"higher" whenever one seed solves a task the single record fails, "lower" whenever one seed fails a task it
solves, so even identically distributed records favour "higher" on hard tasks (about 3 : 1 for three seeds).
:func:`exchangeable_sign_test` keeps the counts and takes the null distribution from the records themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from math import comb

__all__ = [
    "binomial_two_sided",
    "exchangeable_sign_test",
    "exchangeable_sign_test_by_task",
    "mcnemar_exact",
    "sign_test",
]


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


def exchangeable_sign_test(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> dict[str, float]:
    """Two-sided exact per-task sign test of the records ``a`` (``a[r][i]``: record r's outcome on task i, e.g.
    one record per seed) against the records ``b`` (e.g. the warm start's one), with the null distribution of
    exchangeable records instead of ``Binomial(n, 1/2)``.

    Statistic: ``S = sum_i sign(mean_r a[r][i] - mean_r b[r][i])`` (``higher_a - higher_b``). Null: on every
    task, independently, the ``k_a + k_b`` records' outcomes are exchangeable, so each of the
    ``C(k_a + k_b, k_b)`` ways to choose which records are ``b``'s is equally likely; ``S``'s exact
    distribution is the convolution of the tasks' terms, and
    ``p_two_sided = min(1, 2 * min(P[S >= s], P[S <= s]))``. With one record each it is :func:`sign_test`'s
    p. With several seeds against one record it is not: if every record solved a task with probability q,
    three seeds' mean would be higher than the record's with probability ``(1 - q)(1 - (1 - q)^3)`` and lower
    with ``q (1 - q^3)``, so the Binomial null calls a policy no different from the record better.

    Returns:
        ``n``, ``higher_a``, ``higher_b``, ``null_mean`` (E[S] under the null) and ``p_two_sided``.

    Raises:
        ValueError: without a record on either side, or if the records differ in length.
    """
    if not a or not b:
        raise ValueError(f"each side needs at least one record; got {len(a)} and {len(b)}")
    n = len(a[0])
    if any(len(r) != n for r in [*a, *b]):
        raise ValueError(f"records must pair task by task; got lengths {sorted({len(r) for r in [*a, *b]})}")
    return exchangeable_sign_test_by_task([([r[i] for r in a], [r[i] for r in b]) for i in range(n)])


def exchangeable_sign_test_by_task(
    tasks: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> dict[str, float]:
    """:func:`exchangeable_sign_test` with each task's own outcomes: ``tasks[i] = (a_i, b_i)``, A's and B's
    outcomes on task i (e.g. sampled episodes, as many as each played there; each side at least one).

    Raises:
        ValueError: if a task has no outcome on one side.
    """
    dist = {0: 1.0}  # the distribution of the partial sum S, task by task
    s = higher_a = higher_b = 0
    for i, (xs, ys) in enumerate(tasks):
        if not xs or not ys:
            raise ValueError(f"task {i}: each side needs at least one outcome; got {len(xs)} and {len(ys)}")
        observed = _sign(sum(map(float, xs)) / len(xs) - sum(map(float, ys)) / len(ys))
        s += observed
        higher_a += observed > 0
        higher_b += observed < 0
        terms = _null_terms([float(x) for x in [*xs, *ys]], len(ys))
        if terms != {0: 1.0}:
            new: dict[int, float] = {}
            for total, pr in dist.items():
                for term, q in terms.items():
                    new[total + term] = new.get(total + term, 0.0) + pr * q
            dist = new
    upper = sum(pr for total, pr in dist.items() if total >= s)
    lower = sum(pr for total, pr in dist.items() if total <= s)
    return {
        "n": float(len(tasks)),
        "higher_a": float(higher_a),
        "higher_b": float(higher_b),
        "null_mean": sum(total * pr for total, pr in dist.items()),
        "p_two_sided": min(1.0, 2 * min(upper, lower)),
    }


def _sign(x: float) -> int:
    """-1, 0 or 1; a difference of means within float rounding (1e-12) is a tie."""
    return (x > 1e-12) - (x < -1e-12)


def _null_terms(pool: list[float], k_b: int) -> dict[int, float]:
    """One task's term ``sign(mean_A - mean_B)`` under the null: its distribution over the equally likely
    choices of which ``k_b`` of the ``pool``'s outcomes are B's (for 0/1 outcomes by the hypergeometric
    count of B's successes, else by enumerating the choices)."""
    n, k_a = len(pool), len(pool) - k_b
    terms: dict[int, float] = {}
    if all(x in (0.0, 1.0) for x in pool):
        solved, total = int(sum(pool)), comb(n, k_b)
        for j in range(max(0, k_b - (n - solved)), min(solved, k_b) + 1):  # j of B's outcomes are successes
            term = _sign((solved - j) / k_a - j / k_b)
            terms[term] = terms.get(term, 0.0) + comb(solved, j) * comb(n - solved, k_b - j) / total
        return terms
    splits = list(combinations(range(n), k_b))
    for chosen in splits:
        mean_b = sum(pool[j] for j in chosen) / k_b
        mean_a = sum(pool[j] for j in range(n) if j not in chosen) / k_a
        term = _sign(mean_a - mean_b)
        terms[term] = terms.get(term, 0.0) + 1 / len(splits)
    return terms
