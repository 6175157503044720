"""Two-sided exact McNemar and sign tests against hand-computed binomial tails."""

import pytest

from dreamgym.stats import (
    binomial_two_sided,
    exchangeable_sign_test,
    exchangeable_sign_test_by_task,
    mcnemar_exact,
    sign_test,
)


def test_mcnemar_by_hand():
    # 3 tasks only A solved, 1 only B, 2 both, 4 neither: 2 P[X >= 3], X ~ Bin(4, 1/2) = 2 (4 + 1) / 16
    a = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    b = [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    out = mcnemar_exact(a, b)
    assert out["only_a"] == 3 and out["only_b"] == 1 and out["n"] == 10
    assert out["success_a"] == 0.5 and out["success_b"] == 0.3
    assert out["p_two_sided"] == pytest.approx(10 / 16)
    assert "p_one_sided" not in out  # one convention: two-sided only
    assert mcnemar_exact(b, a)["p_two_sided"] == out["p_two_sided"]  # symmetric
    assert mcnemar_exact([1, 0], [1, 0])["p_two_sided"] == 1.0  # no discordant task: no evidence either way
    with pytest.raises(ValueError, match="same length"):
        mcnemar_exact([1], [1, 0])


def test_two_sided_binomial_by_hand():
    assert binomial_two_sided(0, 0) == 1.0
    assert binomial_two_sided(2, 2) == 1.0  # balanced: capped at 1, not 2 P[X >= 2] = 22 / 16
    assert binomial_two_sided(5, 0) == pytest.approx(2 / 32)
    assert binomial_two_sided(0, 5) == pytest.approx(2 / 32)
    # the per-task figure for real-env GRPO: 12 higher / 3 lower, 2 P[X >= 12], X ~ Bin(15, 1/2)
    assert binomial_two_sided(12, 3) == pytest.approx(2 * (1 + 15 + 105 + 455) / 2**15)
    assert round(binomial_two_sided(12, 3), 3) == 0.035
    with pytest.raises(ValueError, match=">= 0"):
        binomial_two_sided(-1, 2)


def test_sign_test_on_graded_outcomes_by_hand():
    # higher with A on tasks 0, 1, 2, 4; with B on task 3; ties (5, 6) carry nothing: 2 P[X >= 4], X ~ Bin(5, 1/2)
    a = [0.5, 1.0, 0.2, 0.0, 0.75, 0.3, 0.0]
    b = [0.1, 0.5, 0.1, 0.4, 0.25, 0.3, 0.0]
    out = sign_test(a, b)
    assert (out["higher_a"], out["higher_b"], out["n"]) == (4, 1, 7)
    assert out["mean_a"] == pytest.approx(sum(a) / 7) and out["mean_b"] == pytest.approx(sum(b) / 7)
    assert out["p_two_sided"] == pytest.approx(12 / 32)
    assert sign_test(b, a)["p_two_sided"] == pytest.approx(12 / 32)
    # on success bits it is McNemar's test
    bits_a, bits_b = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert sign_test(bits_a, bits_b)["p_two_sided"] == mcnemar_exact(bits_a, bits_b)["p_two_sided"]
    with pytest.raises(ValueError, match="same length"):
        sign_test([0.5], [0.5, 0.1])


def test_the_exchangeable_sign_test_is_the_sign_test_for_one_record_each_and_corrects_several_seeds():
    a = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0]
    b = [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    one = exchangeable_sign_test([a], [b])
    assert (one["higher_a"], one["higher_b"]) == (3, 1)
    assert one["p_two_sided"] == pytest.approx(sign_test(a, b)["p_two_sided"])  # 10 / 16, as by hand above
    assert one["null_mean"] == pytest.approx(0.0)
    # three seeds against one record on 3 hard tasks: seed-means 1/3, 1/3, 1/3 against 0, 0, 0. The Binomial
    # null reads 3 / 0 as p = 0.25; under exchangeability each task's term is +1 with probability 3/4 (any of
    # the 3 failed records is the reference), so S = 3 has probability 27/64: p = 2 * 27 / 64
    seeds = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    out = exchangeable_sign_test(seeds, [[0, 0, 0]])
    assert (out["higher_a"], out["higher_b"]) == (3, 0) and sign_test([1 / 3] * 3, [0] * 3)[
        "p_two_sided"
    ] == 0.25
    assert out["null_mean"] == pytest.approx(3 * (3 / 4 - 1 / 4))
    assert out["p_two_sided"] == pytest.approx(2 * 27 / 64)
    # two records on the reference side: the splits are the C(4, 2) choices of which two are its
    assert exchangeable_sign_test([[1], [1]], [[0], [0]])["p_two_sided"] == pytest.approx(2 * 1 / 6)
    with pytest.raises(ValueError, match="pair task by task"):
        exchangeable_sign_test([[1, 0]], [[1]])
    with pytest.raises(ValueError, match="at least one record"):
        exchangeable_sign_test([], [[1]])


def test_the_exchangeable_sign_test_on_graded_outcomes_and_uneven_counts_by_hand():
    # task 1: A 0.5, 0.1 against B 0.3: under the null B is any one of the three (terms -1, +1 and a tie
    # 0.3 = 0.3, 1/3 each; observed: the tie); task 2: A 0.2, 0.9 against B 0.4: +1 unless B is 0.9 (2/3)
    out = exchangeable_sign_test_by_task([([0.5, 0.1], [0.3]), ([0.2, 0.9], [0.4])])
    assert (out["higher_a"], out["higher_b"]) == (1, 0) and out["null_mean"] == pytest.approx(1 / 3)
    # S = 1: P[S >= 1] = 2/3 (task 2 +1) * 2/3 (task 1 not -1) = 4/9; P[S <= 1] = 1 - 1/3 * 2/3
    assert out["p_two_sided"] == pytest.approx(8 / 9)
    # the records' form is the by-task form on their columns; 0/1 outcomes take the hypergeometric shortcut
    assert exchangeable_sign_test([[0.5, 0.2], [0.1, 0.9]], [[0.3, 0.4]]) == out
    uneven = [([1, 0, 0, 0, 1, 0], [0, 0]), ([1, 1, 1], [1]), ([0], [1, 0, 1])]
    # task 1: 2 of 8 solved, B holds 2: none of them solved (C(6,2)/C(8,2) = 15/28) -> +1, one or both
    # (13/28) -> -1; observed A 2/6 against 0: +1. Task 2: all solved: 0. Task 3: 2 of 4 solved, B holds 3:
    # one solved (1/2) -> +1, both (1/2) -> -1; observed A 0 against 2/3: -1. S = 0:
    # P[S >= 0] = 15/28 + 13/28 * 1/2, P[S <= 0] = 13/28 + 15/28 * 1/2 = 41/56: p = min(1, 82/56)
    out = exchangeable_sign_test_by_task(uneven)
    assert (out["higher_a"], out["higher_b"]) == (1, 1)
    assert out["null_mean"] == pytest.approx(2 / 28) and out["p_two_sided"] == 1.0
    with pytest.raises(ValueError, match="at least one outcome"):
        exchangeable_sign_test_by_task([([1], [])])
