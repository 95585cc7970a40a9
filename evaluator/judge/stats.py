"""A case's speedup from its pairs of rounds: the median ratio and a distribution-free
interval (`median_interval`); a round's time (`round_time`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


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
