"""One problem's ranking: every team's best result on it, and the examples' beside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from django.db.models import Case, F, When, Window
from django.db.models.functions import RowNumber

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult

# Columns of a ranking row, after the one the results are grouped by.
_COLUMNS = (
    "speedup",
    "time_us",
    "ref_time_us",
    "roofline",
    "submission__finished_at",
    "speedup_low",
    "speedup_high",
    "run_count",
    "submission_id",
)


@dataclass(frozen=True)
class ProblemRow:
    """One team's best result on one problem."""

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
    run_count: int = 1  # judged runs the numbers are the medians of
    submission_id: int | None = None


@dataclass(frozen=True)
class ExampleRow:
    """An example's best result on one problem: shown beside the ranking, never ranked."""

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
    """Every team's best passed, unflagged result on one problem, fastest first, and each
    example's (by label) beside them; one query.

    Among equal speedups the team that got there first ranks higher, as on the leaderboard.
    """
    order = [
        F("speedup").desc(nulls_last=True),
        F("submission__finished_at").asc(),
        F("id").asc(),
    ]
    # One group per team and one per example label (the team NULL for examples).
    team = Case(When(submission__example_label="", then=F("submission__team_id")))
    best = (
        ProblemResult.objects.judged(profile=profile)
        .passed()
        .unflagged()
        .filter(problem=problem)
        .annotate(
            place=Window(
                RowNumber(),
                partition_by=[team, F("submission__example_label")],
                order_by=order,
            )
        )
        .filter(place=1)
        .order_by(*order)
        .values_list(
            "submission__example_label",
            "submission__team__name",
            "submission__team__slug",
            *_COLUMNS,
        )
    )
    board = ProblemBoard()
    for label, name, slug, *columns in best:
        if label:
            board.examples.append(ExampleRow(label, *columns))
        else:
            board.ranking.append(ProblemRow(len(board.ranking) + 1, name, slug, *columns))
    return board


def problem_ranking(*, problem: Problem, profile: str) -> list[ProblemRow]:
    """Every team's best passed, unflagged result on one problem, fastest first; one query."""
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
