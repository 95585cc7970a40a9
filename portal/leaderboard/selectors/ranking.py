"""One problem's ranking: every team's best result on it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult


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


def problem_ranking(*, problem: Problem, profile: str) -> list[ProblemRow]:
    """Every team's best passed, unflagged result on one problem, fastest first; one query.

    Among equal speedups the team that got there first ranks higher, as on the leaderboard.
    """
    order = [
        F("speedup").desc(nulls_last=True),
        F("submission__finished_at").asc(),
        F("id").asc(),
    ]
    best = (
        ProblemResult.objects.counted(profile=profile)
        .passed()
        .unflagged()
        .filter(problem=problem)
        .annotate(
            place=Window(RowNumber(), partition_by=[F("submission__team_id")], order_by=order)
        )
        .filter(place=1)
        .order_by(*order)
        .values_list(
            "submission__team__name",
            "submission__team__slug",
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
    )
    return [ProblemRow(i, *row) for i, row in enumerate(best, start=1)]
