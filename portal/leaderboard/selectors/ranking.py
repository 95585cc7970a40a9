"""One problem's ranking: every team's counted result on it, and the examples' beside it.

Ordered as the board is (portal/leaderboard/scoring.py), by what a result is sure to reach:
the lower end of its speedup's interval (the point speedup where a host reported none).
A result whose interval covers 1.0, as the reference's own code's does, stays under the
reference's row; teams whose intervals overlap get a rank range ("2-3")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from portal.leaderboard.scoring import faster_beyond_noise, place_ranges
from portal.leaderboard.selectors.counted import counted_query, counted_results
from portal.problems.models import Problem


class _Counted:
    """What a problem's table reads of a result's numbers, as the board counts them."""

    speedup: float | None
    speedup_low: float | None

    @property
    def lower(self) -> float | None:
        """What it is sure to reach: its interval's lower end, else its point speedup."""
        return _lower(self)

    @property
    def is_faster(self) -> bool:
        """Faster than the reference beyond noise: its whole interval above 1.0."""
        return faster_beyond_noise(self.speedup, self.speedup_low)


@dataclass(frozen=True)
class ProblemRow(_Counted):
    """One team's counted result on one problem."""

    rank: int
    team_name: str
    team_slug: str
    speedup: float | None
    time_us: float | None
    ref_time_us: float | None
    roofline: float | None
    reached_at: datetime | None
    speedup_low: float | None = None  # the speedup's interval, when the host reported one
    speedup_high: float | None = None
    run_count: int = 1  # judged runs of the code the numbers are the medians of
    submission_id: int | None = None  # the newest submission of the code
    rank_low: int | None = None  # the places its interval allows (scoring.place_ranges)
    rank_high: int | None = None

    @property
    def rank_range(self) -> str | None:
        """ "2-3" where its interval does not separate it from others', else None."""
        if self.rank_low is None or self.rank_high is None or self.rank_low == self.rank_high:
            return None
        return f"{self.rank_low}-{self.rank_high}"


@dataclass(frozen=True)
class ExampleRow(_Counted):
    """An example's counted result on one problem: shown beside the ranking, never ranked."""

    label: str
    speedup: float | None
    time_us: float | None
    ref_time_us: float | None
    roofline: float | None
    reached_at: datetime | None
    speedup_low: float | None = None
    speedup_high: float | None = None
    run_count: int = 1
    submission_id: int | None = None  # its public source: examples' bundles are public


@dataclass(frozen=True)
class ProblemEntry:
    """A line of a problem's table: a team's row, an example's, or the reference's."""

    kind: Literal["team", "example", "baseline"]
    row: ProblemRow | ExampleRow | None = None


@dataclass
class ProblemBoard:
    """A problem's table: the teams' ranking and the examples shown beside it."""

    ranking: list[ProblemRow] = field(default_factory=list)
    examples: list[ExampleRow] = field(default_factory=list)

    @property
    def entries(self) -> list[ProblemEntry]:
        return problem_entries(self.ranking, self.examples)


def problem_board(*, problem: Problem, profile: str) -> ProblemBoard:
    """Every team's counted result on one problem (its newest code's, pooled over its runs:
    selectors/counted.py), by their intervals' lower ends, and each example's (by label)
    beside them; one query, two when some counted result was re-run.

    Among equal lower ends the team that got there first ranks higher, as on the leaderboard.
    """
    results = counted_query(profile=profile).filter(problem=problem)
    entries = sorted(
        counted_results(results),
        key=lambda c: (
            _place(_lower(c)),
            c.reached_at.timestamp() if c.reached_at else 0.0,
            c.submission_id,
        ),
    )
    board = ProblemBoard()
    for c in entries:
        columns = (
            c.speedup,
            c.time_us,
            c.ref_time_us,
            c.roofline,
            c.reached_at,
            c.speedup_low,
            c.speedup_high,
            c.run_count,
            c.submission_id,
        )
        if c.team_id is None:
            board.examples.append(ExampleRow(c.label, *columns))
        else:
            row = ProblemRow(len(board.ranking) + 1, c.team_name, c.team_slug, *columns)
            board.ranking.append(row)
    board.ranking = _with_ranges(board.ranking)
    return board


def _with_ranges(ranking: list[ProblemRow]) -> list[ProblemRow]:
    # A result without a speedup (passed untimed) places at 0 on either side; one without
    # an interval at its point speedup on both.
    lows = [r.lower or 0.0 for r in ranking]
    highs = [max(r.speedup_high or r.speedup or 0.0, r.lower or 0.0) for r in ranking]
    return [
        replace(row, rank_low=low, rank_high=high)
        for row, (low, high) in zip(ranking, place_ranges(lows, highs), strict=True)
    ]


def problem_ranking(*, problem: Problem, profile: str) -> list[ProblemRow]:
    """Every team's counted result on one problem, surest first (`problem_board`)."""
    return problem_board(problem=problem, profile=profile).ranking


def _place(speedup: float | None) -> float:
    return -speedup if speedup is not None else float("inf")


def _lower(row: Any) -> float | None:
    """What a result is sure to reach: its interval's lower end, else its point speedup."""
    return row.speedup_low if row.speedup_low is not None else row.speedup


def problem_entries(ranking: list[ProblemRow], examples: list[ExampleRow]) -> list[ProblemEntry]:
    """The ranking with the reference and the examples where their lower ends put them.

    The reference (1.0, no interval) goes above the first team not faster than it beyond
    noise (it was there first); an example goes under every team at least as sure (it
    never stands in front of a team that matched it).
    """
    keyed = [((_place(1.0), 0, 0), ProblemEntry("baseline"))]
    keyed += [((_place(r.lower), 1, i), ProblemEntry("team", r)) for i, r in enumerate(ranking)]
    keyed += [((_place(r.lower), 2, i), ProblemEntry("example", r)) for i, r in enumerate(examples)]
    return [entry for _, entry in sorted(keyed, key=lambda pair: pair[0])]
