"""A case's speedup from its pairs of rounds: times net of the harness (`net_of_harness`),
pairs taken two by two, one of each order (`crossover_blocks`), the median of the blocks
and a distribution-free interval (`median_interval`); a round's time (`round_time`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from evaluator.contract import CaseResult

# A round's time net of the harness never reads less than this share of its gross time: a
# call quicker than the harness's own noise is not measured to better than that.
NET_FLOOR = 0.05
# The reported interval's nominal confidence. Blocks of neighbouring pairs are not
# independent (a host's speed phases outlast a block): over the same-code judgings of
# 2026-11-26 on this code (H100, H200, 2x H200; 39 intervals) a nominal 95% interval
# covered 1.00 in 35 (90%), a nominal 99% one in all 39, at about twice the width. The
# reported interval is the 99% one (docs/measurements/2026-11-26-order-effect.md). How
# many pairs a case takes follows the 95% one's width (`settled`): settling on the 99%
# one took half as many pairs again and read no closer to 1.00
# (docs/measurements/2026-11-26-pairs-to-settle.md).
REPORTED = 0.99
SETTLING = 0.95
# What no number of pairs can shrink: the same code reads differently from one evaluation
# (one pair of runner processes) to the next. On GPU hosts the reported interval adds this
# relative spread of a run's median, at the interval's confidence, to the pairs' own
# (`with_run_spread`; the host's PKB_RUN_SPREAD, evaluator/host/settings.py).


def round_time(per_rank: Sequence[Sequence[float]]) -> float:
    """A round's time: the mean over its calls of the slowest rank's time per call."""
    lengths = {len(times) for times in per_rank}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"ranks report different or no call counts: {sorted(lengths)}")
    slowest = [max(column) for column in zip(*per_rank, strict=True)]
    return statistics.fmean(slowest)


def median_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The median of `values` and a distribution-free confidence interval for it.

    The interval is between order statistics x_(k) and x_(n-k+1), with k the largest
    whose coverage 1 - 2 P(Binomial(n, 1/2) < k) reaches `confidence`: exact for any
    continuous distribution (no symmetry assumed), deterministic (no resampling seed),
    and honest at the few rounds an evaluation affords, where a bootstrap of the median
    is known to cover less than it claims. Below 6 values no k reaches 95%: the interval
    is then the range, whose coverage is 1 - 2^(1-n) (75% at 3 values).
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    k = 1
    for candidate in range(1, n // 2 + 1):
        below = sum(math.comb(n, j) for j in range(candidate)) / 2**n  # P(B < candidate)
        if 2 * below > 1 - confidence:
            break
        k = candidate
    return statistics.median(xs), xs[k - 1], xs[n - k]


def net_of_harness(result: CaseResult, target_halfwidth: float, run_spread: float = 0.0) -> None:
    """A case's times and speedup from its pairs so far, net of the harness: each round
    less the case's quickest tare, the same on both sides (the harness's cost per call is
    the same for the reference and the candidate, and the quickest tare never takes away
    more than it costs). Recomputed from the gross times after every pair: the quickest
    tare may change. The reported interval adds `run_spread` (`with_run_spread`);
    `settled`: the pairs' own 95% interval is within `target_halfwidth` of the median
    (more pairs narrow that one; the run's spread they cannot)."""
    pairs = result.rounds
    harness = min(p["tare_us"] for p in pairs)
    for pair in pairs:
        for side in ("reference", "candidate"):
            gross = pair[f"{side}_gross_us"]
            pair[f"{side}_us"] = max(gross - harness, NET_FLOOR * gross)
        pair["harness_us"] = harness
    candidate = [p["candidate_us"] for p in pairs]
    reference = [p["reference_us"] for p in pairs]
    result.time_us = statistics.median(candidate)
    result.time_spread_us = iqr(candidate)
    result.ref_time_us = statistics.median(reference)
    result.pairs = len(pairs)
    ratios = [p["reference_us"] / p["candidate_us"] for p in pairs if p["candidate_us"] > 0]
    if ratios:
        result.speedup, result.speedup_low, result.speedup_high = speedup_interval(
            ratios, run_spread=run_spread
        )
        _, low, high = speedup_interval(ratios, SETTLING)
        result.settled = (high - low) / 2 <= target_halfwidth * result.speedup


def speedup_interval(
    ratios: Sequence[float], confidence: float = REPORTED, run_spread: float = 0.0
) -> tuple[float, float, float]:
    """The speedup and its interval from the pairs' ratios, in the order they ran: the
    median of the crossover blocks and the blocks' order-statistic interval; with too few
    blocks for any order statistics to reach `confidence` (under 6 for 95%, 8 for 99%)
    the range of the pairs' ratios, which holds every block (a block lies between its
    two ratios). With `run_spread`, widened by it (`with_run_spread`)."""
    blocks = crossover_blocks(ratios)
    if 1 - 2.0 ** (1 - len(blocks)) >= confidence:  # the blocks' range reaches it
        median, low, high = median_interval(blocks, confidence)
    else:
        median, low, high = statistics.median(blocks), min(ratios), max(ratios)
    return median, *with_run_spread(median, low, high, run_spread, confidence)


def with_run_spread(
    median: float, low: float, high: float, run_spread: float, confidence: float
) -> tuple[float, float]:
    """The interval's ends widened by a run-level spread: on a log scale each half adds,
    in quadrature, `run_spread` (a relative standard deviation of a run's median) times
    the normal quantile of `confidence`. The pairs' interval says how well this run's
    processes were measured; this says how far another run's processes could read. Over
    twelve same-code runs of 2026-11-26 (one H100 on three leases, one H200; 36 cases of
    up to 200 pairs) the pairs' own 99% intervals covered 1.00 in 32 and read within 2% in
    26; on one H100 lease four runs of seven read 5-7% against the candidate at
    launch-bound sizes, in both orders alike. With 2% added, all 36 covered it
    (docs/measurements/2026-11-26-pairs-to-settle.md)."""
    if run_spread <= 0 or not 0 < low <= median <= high:
        return low, high
    z = statistics.NormalDist().inv_cdf((1 + confidence) / 2)
    extra = (z * run_spread) ** 2
    down = math.sqrt(math.log(median / low) ** 2 + extra)
    up = math.sqrt(math.log(high / median) ** 2 + extra)
    return median * math.exp(-down), median * math.exp(up)


def crossover_blocks(ratios: Sequence[float]) -> list[float]:
    """The speedups to take the median of: pairs two by two in the order they ran (the
    judge alternates which side goes first, so each block holds one pair of each order),
    each block the geometric mean of its two ratios; a lone last pair waits for its
    partner. A single pair is its own block.

    Why blocks and not pairs: whichever side goes second in a pair can run a few percent
    slower or faster than first (measured at launch-bound sizes on H100 and H200), so the
    ratios of the two orders form two clusters around the true speedup, r*e and r/e. The
    median of such pairs falls anywhere between them and its interval is stretched by the
    gap; the geometric mean of one of each is r for any such e. Neighbouring pairs also
    share a host's speed phase, which a block then holds inside itself rather than
    spreading it over the interval's order statistics as if the pairs were independent."""
    if len(ratios) == 1:
        return list(ratios)
    return [math.sqrt(ratios[i] * ratios[i + 1]) for i in range(0, len(ratios) - 1, 2)]


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1
