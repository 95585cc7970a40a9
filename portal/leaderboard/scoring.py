"""Scores of one team over a set of problems: pure Python, no database.

The field's headline metrics (KernelBench and its successors), counted beyond noise:

- fast_p: the share of the published problems in scope that the team solved faster than p
  times the reference, where "faster" means that the whole interval of the speedup (the
  judge's: a nominal 99% on GPU hosts, the range of six pairs, about 97%, on CPU hosts;
  evaluator/judge/stats.py) is above p: its lower end is (`Solved.lower`). fast_0 is
  "solved correctly" (a pass without a timing counts), fast_1 "faster than PyTorch + NCCL".
  A result without an interval counts by its point speedup: only results of older hosts,
  which reported none, lack one (the judge reports one with every timed result). Shares
  are weighted by `Problem.weight`, so an admin can make a hard problem count double; with
  the default weights (1.0) a share is a count over the total.
- geomean: the geometric mean of the point speedups (the pooled medians, below) over the
  solved problems that have one (unweighted: it describes the kernels, not the scope).
- roofline: the mean fraction of the link limit over the solved problems that report one;
  None on hosts without a measured peer bandwidth (CPU hosts).

Which result counts (portal/leaderboard/selectors/counted.py): per team and problem, the
team's newest passed, unflagged result at the problem's current version (its newest code),
with its numbers pooled over every passed, unflagged run of that same code by that team
(earlier submissions whose code for the problem has the same digest,
portal/submissions/digests.py, and their re-runs): the speedup and both interval ends are
the medians over the pool's runs. Why this resists resubmission: counting a team's best
result over its submissions counts the maximum of noisy draws, which climbs with the
number of draws (resubmitting an unchanged bundle raised a team's fast_1 from 25% to 38%).
Resubmitting the same code here only adds draws to a pool whose median does not climb with
their number; new code starts a new pool and replaces the old one, even when it is slower.
Nor does stopping at the first draw that counts pay: in a simulation (2026-11-27, 400,000
teams each; same code whose lower end is a normal draw over 1.0 in 0.5% of runs, one side
of a calibrated 99% interval), a pooled median counted for 0.49% of teams that submit once
and 0.52% of teams that resubmit until it counts, up to 20 times; the best of 20 draws
would count for 9.5%. What it does not stop: a team that changes its code's meaning with
every submission gets a fresh draw each time (the newest counts alone), as many as its
submission quota allows; a comment or a reformatting is the same code and earns none.

Ranking order, decided here once for every board: fast_1, then fast_0, then the geomean of
the intervals' lower ends, then the earlier time of reaching the score (`Row.reached_at`).
Every part of the key is counted beyond noise, as fast_p is.

- fast_1 first because beating PyTorch + NCCL is what the site exists to reward. fast_0
  cannot come first: the reference of every problem is public, so a team that submits it
  unchanged solves everything at about 1.0x and would top a board ordered by problems
  solved without writing a single kernel.
- fast_0 second: between two teams that beat the reference equally often, the one whose
  kernels are correct on more problems has done more of the work.
- the lower ends' geomean third: it separates teams with the same counts by how much
  faster they are sure to be. Not the point geomean: a team whose code is the reference's
  draws point speedups on both sides of 1.0, and with every problem solved it would stand
  above the reference row whenever their geomean came out over 1.0 (a coin toss per board).
  Its lower ends are under 1.0 wherever its intervals cover 1.0, as they do for the same
  code, so it stays under the reference. A result without an interval counts its point
  speedup here, as in fast_p.
- Earliest wins the tie that remains, as on every contest board.

The reference row (speedup 1.0 everywhere, no interval: fast_0 = 1, fast_1 = 0, lower
ends' geomean 1.0) ranks by the same key; a team ties with it only by matching it, and then
the reference, there first, stays above.

Ties shown where they are: the order above is deterministic, but two teams' scores may not
be separable within their intervals. Each score has a pessimistic key (`Score.sort_key`
itself: every part at the lower ends) and an optimistic one (fast_1 counted on the upper
ends, the geomean of the upper ends); a team's rank range runs from 1 + the number of
teams whose pessimistic key beats its optimistic key to the number of teams whose
optimistic key reaches its pessimistic key (`place_ranges`). The board shows "2-4" where
that range has more than one place; a problem's table does the same with each result's
interval (selectors/ranking.py).

Model and agent entries (portal/entries) are scored per attempt, not per counted result:
an entry declares n samples per problem and k before its first sample, and each problem's
pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
Trained on Code"), pass@k = 1 - C(n - c, k) / C(n, k) over its n judged samples of which c
passed (`pass_at_k`); fast_1@k is the same with c the samples that passed with the
speedup's interval above 1, the board's rule. Never the best of the samples: that climbs
with n as the best of a team's resubmissions would. An entry's row on a board is its
expected score with one sample per problem: each passed sample counts as a `Solved` of
weight w/n, so the row's fast_p is fast_p@1 (fast_0 is pass@1) and ranks by the key
above.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

# The rule in one sentence, said once on each surface: the leaderboard page, the API's
# schema, and pkb's board.
RULE = (
    "A problem counts as faster than p only when its speedup's whole interval is above p, and "
    "each team's newest code counts, pooled over all its runs, so resubmitting the same "
    "code cannot raise its expected score; a rank range such as 2-4 marks teams whose "
    "scores the intervals cannot separate."
)

HEADLINE_P = (0, 1, 2)
CURVE_MAX_P = 4.0

SortKey = tuple[float, float, float]
K = TypeVar("K", SortKey, float)


class Solved(NamedTuple):
    """One counted result: its speedup (None: passed without a timing), weight, roofline
    fraction and the speedup's interval (None: a host that reported none). A named tuple:
    a board makes one per team and problem (33,000 at 1,000 teams), and a tuple is made
    several times faster than a frozen dataclass."""

    speedup: float | None
    weight: float = 1.0
    roofline: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def lower(self) -> float | None:
        """What fast_p counts: the interval's lower end, or the speedup without one."""
        return self.low if self.low is not None else self.speedup

    @property
    def upper(self) -> float | None:
        return self.high if self.high is not None else self.speedup


def faster_beyond_noise(speedup: float | None, low: float | None) -> bool:
    """A result's "faster" mark wherever it is shown: as fast_1 counts it, its interval's
    lower end (its speedup without one) above 1."""
    return _above(Solved(speedup, low=low), 1)


def _above(solved: Solved, p: float, *, optimistic: bool = False) -> bool:
    if p <= 0:
        return True  # fast_0: correct, timed or not
    end = solved.upper if optimistic else solved.lower
    return end is not None and end > p


def _log(value: float | None) -> float:
    # Interval ends of a timed result are ratios of times: positive. A zero would be a
    # host's error; it must not raise while a board is built.
    return math.log(value) if value is not None and value > 0 else math.log(1e-12)


@dataclass(frozen=True)
class Totals:
    """The sums a `Score` is made of. They add up, so a team's totals per category make its
    overall score by their sum."""

    solved: int = 0
    faster: int = 0  # lower end over 1
    weights: tuple[float, ...] = (0.0,) * len(HEADLINE_P)  # weight above each HEADLINE_P
    log_sum: float = 0.0  # of the positive speedups, for the geomean
    timed: int = 0  # positive speedups
    roofline_sum: float = 0.0
    rooflines: int = 0
    # For the rank ranges: weight whose upper end is over 1, and the logs of the ends of
    # the timed results.
    faster_weight_high: float = 0.0
    log_low_sum: float = 0.0
    log_high_sum: float = 0.0

    @classmethod
    def of(cls, results: Sequence[Solved]) -> Totals:
        timed = [r for r in results if r.speedup is not None and r.speedup > 0]
        fractions = [r.roofline for r in results if r.roofline is not None]
        return cls(
            solved=len(results),
            faster=sum(1 for r in results if _above(r, 1)),
            weights=tuple(sum(r.weight for r in results if _above(r, p)) for p in HEADLINE_P),
            log_sum=sum(_log(r.speedup) for r in timed),
            timed=len(timed),
            roofline_sum=sum(fractions),
            rooflines=len(fractions),
            faster_weight_high=sum(r.weight for r in results if _above(r, 1, optimistic=True)),
            log_low_sum=sum(_log(r.lower) for r in timed),
            log_high_sum=sum(_log(r.upper) for r in timed),
        )

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            self.solved + other.solved,
            self.faster + other.faster,
            tuple(a + b for a, b in zip(self.weights, other.weights, strict=True)),
            self.log_sum + other.log_sum,
            self.timed + other.timed,
            self.roofline_sum + other.roofline_sum,
            self.rooflines + other.rooflines,
            self.faster_weight_high + other.faster_weight_high,
            self.log_low_sum + other.log_low_sum,
            self.log_high_sum + other.log_high_sum,
        )


@dataclass(frozen=True)
class Score:
    """A team's metrics over a scope of `total` problems whose weights sum to `total_weight`."""

    solved: int
    faster: int  # fast_1 as a count
    fast: tuple[float, ...]  # weighted shares for HEADLINE_P: fast_0, fast_1, fast_2
    geomean: float | None  # of the point speedups
    roofline: float | None
    total: int
    total_weight: float
    # The optimistic and pessimistic bounds of the score (module docstring, ties).
    fast_1_high: float = 0.0  # fast_1 counted on the intervals' upper ends
    geomean_low: float | None = None
    geomean_high: float | None = None

    @classmethod
    def of(cls, results: Sequence[Solved], *, total: int, total_weight: float) -> Score:
        return cls.of_totals(Totals.of(results), total=total, total_weight=total_weight)

    @classmethod
    def of_totals(cls, totals: Totals, *, total: int, total_weight: float) -> Score:
        def share(weight: float) -> float:
            return weight / total_weight if total_weight > 0 else 0.0

        def mean(log_sum: float) -> float | None:
            return math.exp(log_sum / totals.timed) if totals.timed else None

        return cls(
            solved=totals.solved,
            faster=totals.faster,
            fast=tuple(share(w) for w in totals.weights),
            geomean=mean(totals.log_sum),
            roofline=totals.roofline_sum / totals.rooflines if totals.rooflines else None,
            total=total,
            total_weight=total_weight,
            fast_1_high=share(totals.faster_weight_high),
            geomean_low=mean(totals.log_low_sum),
            geomean_high=mean(totals.log_high_sum),
        )

    @classmethod
    def reference(cls, weights: Sequence[float]) -> Score:
        """The PyTorch + NCCL baseline: every problem solved at exactly 1.0x."""
        return cls.of(
            [Solved(1.0, w) for w in weights], total=len(weights), total_weight=sum(weights)
        )

    @property
    def fast_0(self) -> float:
        return self.fast[0]

    @property
    def fast_1(self) -> float:
        return self.fast[1]

    @property
    def fast_2(self) -> float:
        return self.fast[2]

    def sort_key(self) -> SortKey:
        """Larger is better; see the module's docstring for the order. Every part is at the
        intervals' lower ends: the board's order is the pessimistic one."""
        return (self.fast_1, self.fast_0, self.geomean_low or 0.0)

    def pessimistic_key(self) -> SortKey:
        return self.sort_key()

    def optimistic_key(self) -> SortKey:
        """The sort key at the intervals' upper ends."""
        return (self.fast_1_high, self.fast_0, self.geomean_high or 0.0)


def rank_ranges(scores: Sequence[Score]) -> list[tuple[int, int]]:
    """Each score's (best, worst) possible place among `scores` within their intervals."""
    return place_ranges([s.pessimistic_key() for s in scores], [s.optimistic_key() for s in scores])


def place_ranges(pessimistic: Sequence[K], optimistic: Sequence[K]) -> list[tuple[int, int]]:
    """Each item's (best, worst) possible place, larger keys first, from its pessimistic
    and optimistic keys (pessimistic <= optimistic, item by item).

    Best: 1 + the number of others whose pessimistic key beats its optimistic key; worst:
    the number whose optimistic key reaches its pessimistic key (itself included). Both
    hold the item's place in the order of its pessimistic key, whatever the order of ties.
    O(n log n): two sorted lists and bisections.
    """
    lows, highs = sorted(pessimistic), sorted(optimistic)
    n = len(lows)
    ranges = []
    for low, high in zip(pessimistic, optimistic, strict=True):
        beaten_by = n - bisect.bisect_right(lows, high)
        reached_by = n - bisect.bisect_left(highs, low)
        ranges.append((1 + beaten_by, max(reached_by, 1 + beaten_by)))
    return ranges


def fast_p(results: Iterable[Solved], p: float, total_weight: float) -> float:
    if total_weight <= 0:
        return 0.0
    return sum(r.weight for r in results if _above(r, p)) / total_weight


def fast_p_steps(results: Sequence[Solved], total_weight: float) -> list[tuple[float, float]]:
    """The fast_p curve for p in [0, CURVE_MAX_P] as its corners: (p, share) where it drops.

    fast_p is a step function of p that falls at each counted lower end (`Solved.lower`);
    the first point is (0, fast_0). An untimed pass counts at p = 0 only, so the curve drops
    right after 0.
    """
    if total_weight <= 0:
        return [(0.0, 0.0)]
    remaining = sum(r.weight for r in results)
    steps = [(0.0, remaining / total_weight)]
    # Walk the lower ends upwards once: at p = s, every result of lower end s stops counting.
    by_end: dict[float, float] = {}
    for r in results:
        end = r.lower
        key = max(end, 0.0) if end is not None else 0.0
        by_end[key] = by_end.get(key, 0.0) + r.weight
    for p in sorted(by_end):
        if p >= CURVE_MAX_P:
            break
        remaining -= by_end[p]
        share = round(max(remaining, 0.0) / total_weight, 12)  # no 1e-17 left by subtraction
        if share != steps[-1][1]:
            steps.append((p, share))
    return steps


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that k of the n samples, drawn without replacement, include one of the c
    that passed: 1 - C(n - c, k) / C(n, k), unbiased for the model's pass@k (Chen et al.
    2021). Computed as 1 - prod(1 - k / i for i in n - c + 1 .. n), the same ratio, which
    stays exact in floats where the binomials would overflow (n of 200 and more)."""
    if not (1 <= k <= n and 0 <= c <= n):
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0  # every draw of k holds a passing sample
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
