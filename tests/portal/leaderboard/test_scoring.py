from __future__ import annotations

import math

import pytest

from portal.leaderboard.scoring import Score, Solved, fast_p, fast_p_steps, rank_ranges


def test_fast_0_counts_every_pass_timed_or_not():
    results = [Solved(0.5), Solved(None), Solved(3.0)]
    assert fast_p(results, 0, total_weight=4) == 0.75


def test_fast_p_needs_a_speedup_strictly_above_p():
    results = [Solved(1.0), Solved(1.5), Solved(2.0), Solved(2.5)]
    assert [fast_p(results, p, 4) for p in (1, 2)] == [0.75, 0.25]


def test_shares_are_weighted_by_the_problems_weights():
    results = [Solved(3.0, weight=2.0), Solved(0.9, weight=1.0)]
    score = Score.of(results, total=4, total_weight=5.0)
    assert score.fast == pytest.approx((3 / 5, 2 / 5, 2 / 5))
    assert (score.solved, score.faster, score.total) == (2, 1, 4)


def test_the_geomean_is_unweighted_and_skips_untimed_passes():
    score = Score.of([Solved(2.0, 5.0), Solved(8.0), Solved(None)], total=3, total_weight=7)
    assert score.geomean == pytest.approx(4.0)


def test_the_roofline_is_the_mean_of_the_results_that_report_one():
    score = Score.of(
        [Solved(1, roofline=0.2), Solved(1, roofline=0.6), Solved(1)], total=3, total_weight=3
    )
    assert score.roofline == pytest.approx(0.4)
    assert Score.of([Solved(1)], total=1, total_weight=1).roofline is None


def test_the_reference_solves_everything_and_beats_nothing():
    ref = Score.reference([1.0, 1.0, 2.0])
    assert (ref.fast_0, ref.fast_1, ref.fast_2, ref.geomean) == (1.0, 0.0, 0.0, 1.0)


def test_the_ranking_key_puts_fast_1_before_fast_0_before_geomean():
    copied_reference = Score.of([Solved(1.0)] * 10, total=10, total_weight=10)
    one_real_kernel = Score.of([Solved(1.3)], total=10, total_weight=10)
    assert one_real_kernel.sort_key() > copied_reference.sort_key()
    more_correct = Score.of([Solved(1.3), Solved(0.5)], total=10, total_weight=10)
    assert more_correct.sort_key() > one_real_kernel.sort_key()
    faster = Score.of([Solved(1.6), Solved(0.5)], total=10, total_weight=10)
    assert faster.sort_key() > more_correct.sort_key()


def test_the_fast_p_curve_falls_at_each_speedup_until_p_4():
    results = [Solved(None), Solved(0.5), Solved(1.5), Solved(1.5), Solved(6.0)]
    steps = fast_p_steps(results, total_weight=5)
    assert steps == [(0.0, 1.0), (0.0, 0.8), (0.5, 0.6), (1.5, 0.2)]
    assert math.isclose(fast_p(results, 3.9, 5), steps[-1][1])


def test_an_empty_scope_scores_zero():
    score = Score.of([], total=0, total_weight=0)
    assert score.fast == (0.0, 0.0, 0.0) and score.geomean is None


# beyond noise: the interval's lower end counts (issue 23)


def test_fast_p_counts_a_problem_only_when_its_lower_end_is_above_p():
    # 1.31x measured, but the interval reaches down to 0.88: not faster beyond noise.
    noisy, clear = Solved(1.31, low=0.88, high=1.52), Solved(1.31, low=1.05, high=1.6)
    assert fast_p([noisy], 1, 1) == 0.0
    assert fast_p([clear], 1, 1) == 1.0
    assert fast_p([noisy, clear], 0, 2) == 1.0  # fast_0 is correctness, unchanged


def test_a_result_without_an_interval_counts_by_its_speedup():
    legacy = Solved(1.31)  # a host that reported no interval
    assert (legacy.lower, legacy.upper) == (1.31, 1.31)
    assert fast_p([legacy], 1, 1) == 1.0


def test_the_score_counts_lower_ends_and_keeps_the_geomean_on_the_speedups():
    score = Score.of(
        [Solved(2.0, low=1.5, high=2.5), Solved(1.2, low=0.9, high=1.4)], total=2, total_weight=2
    )
    assert (score.faster, score.fast_1, score.fast_1_high) == (1, 0.5, 1.0)
    assert score.geomean == pytest.approx(math.sqrt(2.0 * 1.2))
    assert score.geomean_low == pytest.approx(math.sqrt(1.5 * 0.9))
    assert score.geomean_high == pytest.approx(math.sqrt(2.5 * 1.4))
    assert score.pessimistic_key() <= score.sort_key() <= score.optimistic_key()


def test_the_fast_p_curve_falls_at_the_lower_ends():
    steps = fast_p_steps([Solved(2.0, low=1.5, high=2.5)], total_weight=1)
    assert steps == [(0.0, 1.0), (1.5, 0.0)]


def score(*solved: Solved) -> Score:
    return Score.of(list(solved), total=3, total_weight=3)


def test_separable_scores_keep_single_ranks():
    first = score(Solved(2.0, low=1.9, high=2.1), Solved(2.0, low=1.9, high=2.1))
    second = score(Solved(2.0, low=1.9, high=2.1))
    assert rank_ranges([first, second]) == [(1, 1), (2, 2)]


def test_overlapping_intervals_give_rank_ranges():
    # a and b both solve two problems, one of them faster by its lower end; b's upper ends
    # would make it two, a's geomean could be higher: neither is above the other for sure.
    # c's lower ends beat both of their upper ends.
    a = score(Solved(1.5, low=1.2, high=1.8), Solved(0.8, low=0.7, high=0.9))
    b = score(Solved(1.3, low=1.1, high=1.6), Solved(1.1, low=0.9, high=1.3))
    c = score(*[Solved(3.0, low=2.9, high=3.1)] * 3)
    assert rank_ranges([c, b, a]) == [(1, 1), (2, 3), (2, 3)]


def test_identical_scores_without_intervals_tie():
    same = [score(Solved(1.5)), score(Solved(1.5))]
    assert rank_ranges(same) == [(1, 2), (1, 2)]
