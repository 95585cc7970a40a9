"""The pass@k estimator against values worked out by hand: 1 - C(n-c, k) / C(n, k)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from portal.leaderboard.scoring import pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "by_hand"),
    [
        (1, 0, 1, 0.0),  # the one sample failed
        (1, 1, 1, 1.0),
        (2, 1, 1, 1 / 2),  # one of two
        (2, 1, 2, 1.0),  # both drawn: the passing one is among them
        (3, 1, 1, 1 / 3),
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (3, 2, 1, 2 / 3),
        (3, 0, 3, 0.0),
        (4, 2, 2, 5 / 6),  # 1 - C(2,2)/C(4,2) = 1 - 1/6
        (5, 1, 2, 2 / 5),  # 1 - C(4,2)/C(5,2) = 1 - 6/10
        (5, 2, 3, 9 / 10),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
    ],
)
def test_it_matches_values_computed_by_hand(n, c, k, by_hand):
    assert pass_at_k(n, c, k) == pytest.approx(by_hand, abs=1e-12)


def test_pass_at_1_is_the_share_that_passed():
    assert all(pass_at_k(8, c, 1) == pytest.approx(c / 8) for c in range(9))


def test_it_stays_exact_where_the_binomials_overflow_floats():
    n, c, k = 2000, 7, 600
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


def test_it_never_climbs_with_more_samples_at_the_same_rate():
    # The estimator's point: 2 of 4 and 10 of 20 passing say the same about pass@1, where
    # "best of n" would read 100% for both.
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_at_k(20, 10, 1) == pytest.approx(0.5)


@pytest.mark.parametrize(("n", "c", "k"), [(2, 1, 3), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_it_refuses_what_it_cannot_estimate(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
