"""One problem's ranking: every team's counted result on it, and the examples' beside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from portal.leaderboard.selectors.counted import counted_query, counted_results
from portal.problems.models import Problem


@dataclass(frozen=True)
class ProblemRow:
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


@dataclass(frozen=True)
class ExampleRow:
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
    selectors/counted.py), fastest first, and each example's (by label) beside them; one
    query, two when some counted result was re-run.

    Among equal speedups the team that got there first ranks higher, as on the leaderboard.
    """
    results = counted_query(profile=profile).filter(problem=problem)
    entries = sorted(
        counted_results(results),
        key=lambda c: (
            _place(c.speedup),
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
    return board


def problem_ranking(*, problem: Problem, profile: str) -> list[ProblemRow]:
    """Every team's counted result on one problem, fastest first."""
    return problem_board(problem=problem, profile=profile).ranking


def _place(speedup: float | None) -> float:
    return -speedup if speedup is not None else float("inf")


def problem_entries(ranking: list[ProblemRow], examples: list[ExampleRow]) -> list[ProblemEntry]:
    """The ranking with the reference and the examples where their speedups put them.

    The reference goes above the first team not faster than it (it was there first); an
    example goes under every team at least as fast (it never stands in front of a team
    that matched it).
    """
    keyed = [((_place(1.0), 0, 0), ProblemEntry("baseline"))]
    keyed += [((_place(r.speedup), 1, i), ProblemEntry("team", r)) for i, r in enumerate(ranking)]
    keyed += [
        ((_place(r.speedup), 2, i), ProblemEntry("example", r)) for i, r in enumerate(examples)
    ]
    return [entry for _, entry in sorted(keyed, key=lambda pair: pair[0])]
