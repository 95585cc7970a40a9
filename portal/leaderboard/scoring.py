"""Scores of one team over a set of problems: pure Python, no database.

The field's headline metrics (KernelBench and its successors):

- fast_p: the share of the published problems in scope that the team solved with a speedup
  over the reference above p. fast_0 is "solved correctly" (a pass without a timing counts),
  fast_1 "faster than PyTorch + NCCL". Shares are weighted by `Problem.weight`, so an admin
  can make a hard problem count double; with the default weights (1.0) a share is a count
  over the total.
- geomean: the geometric mean of the speedups over the solved problems that have one
  (unweighted: it describes the kernels, not the scope).
- roofline: the mean fraction of the link limit over the solved problems that report one;
  None on hosts without a measured peer bandwidth (CPU hosts).

Ranking order, decided here once for every board: fast_1, then fast_0, then geomean, then
the earlier time of reaching the score (`Row.reached_at`).

- fast_1 first because beating PyTorch + NCCL is what the site exists to reward. fast_0
  cannot come first: the reference of every problem is public, so a team that submits it
  unchanged solves everything at about 1.0x and would top a board ordered by problems
  solved without writing a single kernel.
- fast_0 second: between two teams that beat the reference equally often, the one whose
  kernels are correct on more problems has done more of the work.
- geomean third: it separates teams with the same counts by how much faster they are.
- Earliest wins the tie that remains, as on every contest board.

The reference row (speedup 1.0 everywhere: fast_0 = 1, fast_1 = 0) ranks by the same key;
a team ties with it only by matching it, and then the reference, there first, stays above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HEADLINE_P = (0, 1, 2)
CURVE_MAX_P = 4.0


@dataclass(frozen=True)
class Solved:
    """One counted (best) result: its speedup (None: passed without a timing) and weight."""

    speedup: float | None
    weight: float = 1.0
    roofline: float | None = None


def _above(solved: Solved, p: float) -> bool:
    if p <= 0:
        return True  # fast_0: correct, timed or not
    return solved.speedup is not None and solved.speedup > p


@dataclass(frozen=True)
class Totals:
    """The sums a `Score` is made of. They add up, so a database can compute them per team
    and category (`portal.leaderboard.selectors`) and a team's overall score is their sum."""

    solved: int = 0
    faster: int = 0  # speedup over 1
    weights: tuple[float, ...] = (0.0,) * len(HEADLINE_P)  # weight above each HEADLINE_P
    log_sum: float = 0.0  # of the positive speedups, for the geomean
    timed: int = 0  # positive speedups
    roofline_sum: float = 0.0
    rooflines: int = 0

    @classmethod
    def of(cls, results: Sequence[Solved]) -> Totals:
        timed = [r.speedup for r in results if r.speedup is not None and r.speedup > 0]
        fractions = [r.roofline for r in results if r.roofline is not None]
        return cls(
            solved=len(results),
            faster=sum(1 for r in results if _above(r, 1)),
            weights=tuple(sum(r.weight for r in results if _above(r, p)) for p in HEADLINE_P),
            log_sum=sum(map(math.log, timed)),
            timed=len(timed),
            roofline_sum=sum(fractions),
            rooflines=len(fractions),
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
        )


@dataclass(frozen=True)
class Score:
    """A team's metrics over a scope of `total` problems whose weights sum to `total_weight`."""

    solved: int
    faster: int  # fast_1 as a count
    fast: tuple[float, ...]  # weighted shares for HEADLINE_P: fast_0, fast_1, fast_2
    geomean: float | None
    roofline: float | None
    total: int
    total_weight: float

    @classmethod
    def of(cls, results: Sequence[Solved], *, total: int, total_weight: float) -> Score:
        return cls.of_totals(Totals.of(results), total=total, total_weight=total_weight)

    @classmethod
    def of_totals(cls, totals: Totals, *, total: int, total_weight: float) -> Score:
        return cls(
            solved=totals.solved,
            faster=totals.faster,
            fast=tuple(w / total_weight if total_weight > 0 else 0.0 for w in totals.weights),
            geomean=math.exp(totals.log_sum / totals.timed) if totals.timed else None,
            roofline=totals.roofline_sum / totals.rooflines if totals.rooflines else None,
            total=total,
            total_weight=total_weight,
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

    def sort_key(self) -> tuple[float, float, float]:
        """Larger is better; see the module's docstring for the order."""
        return (self.fast_1, self.fast_0, self.geomean or 0.0)


def fast_p(results: Iterable[Solved], p: float, total_weight: float) -> float:
    if total_weight <= 0:
        return 0.0
    return sum(r.weight for r in results if _above(r, p)) / total_weight


def fast_p_steps(results: Sequence[Solved], total_weight: float) -> list[tuple[float, float]]:
    """The fast_p curve for p in [0, CURVE_MAX_P] as its corners: (p, share) where it drops.

    fast_p is a step function of p that falls at each speedup; the first point is
    (0, fast_0). An untimed pass counts at p = 0 only, so the curve drops right after 0.
    """
    if total_weight <= 0:
        return [(0.0, 0.0)]
    remaining = sum(r.weight for r in results)
    steps = [(0.0, remaining / total_weight)]
    # Walk the speedups upwards once: at p = s, every result of speedup s stops counting.
    by_speedup: dict[float, float] = {}
    for r in results:
        key = max(r.speedup, 0.0) if r.speedup is not None else 0.0
        by_speedup[key] = by_speedup.get(key, 0.0) + r.weight
    for p in sorted(by_speedup):
        if p >= CURVE_MAX_P:
            break
        remaining -= by_speedup[p]
        share = round(max(remaining, 0.0) / total_weight, 12)  # no 1e-17 left by subtraction
        if share != steps[-1][1]:
            steps.append((p, share))
    return steps
