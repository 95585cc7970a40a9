"""The leaderboard: best result per (team, problem) from the database, scores in Python.

`leaderboard_rows` runs two queries whatever the number of teams, submissions or results:
the published problems, and one row per (team, problem) with the team's best passed,
unflagged result (picked by a window function in the database). A flagged pass (e.g. a time
under the physical floor) is evidence on its submission's page, never a score.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult

BASELINE_NAME = "PyTorch + NCCL (reference)"


@dataclass(frozen=True)
class Score:
    """fast_0 (solved), fast_1 (faster than the reference) and geometric-mean speedup."""

    solved: int
    faster: int
    geomean: float | None
    total: int  # published problems in scope

    @classmethod
    def of(cls, speedups: list[float | None], total: int) -> Score:
        timed = [s for s in speedups if s is not None and s > 0]
        geomean = math.exp(sum(map(math.log, timed)) / len(timed)) if timed else None
        faster = sum(1 for s in timed if s > 1)
        return cls(solved=len(speedups), faster=faster, geomean=geomean, total=total)

    def sort_key(self) -> tuple:
        return (-self.solved, -self.faster, -(self.geomean or 0.0))


@dataclass(frozen=True)
class CategoryColumn:
    value: str
    label: str
    total: int


@dataclass
class Row:
    team_name: str
    team_slug: str
    score: Score
    categories: list[Score]  # in the order of the columns
    reached_at: datetime | None  # when the team reached its score (its last improvement)
    # Mean fraction of the link limit over the counted results that report one; None on
    # hosts without a measured peer bandwidth (CPU) and for the baseline.
    roofline: float | None = None
    is_baseline: bool = False
    rank: int | None = None  # None for the baseline


@dataclass
class Board:
    profile: str
    category: str | None
    columns: list[CategoryColumn]
    rows: list[Row] = field(default_factory=list)


def _best_results(*, profile: str, problem_ids: list[int]) -> list[dict[str, Any]]:
    """The best passed, unflagged result of each (team, problem); earliest among equals."""
    team = F("submission__team_id")
    ranked = (
        ProblemResult.objects.counted(profile=profile)
        .passed()
        .unflagged()
        .filter(problem_id__in=problem_ids)
        .annotate(
            place=Window(
                RowNumber(),
                partition_by=[team, F("problem_id")],
                order_by=[F("speedup").desc(nulls_last=True), F("submission__finished_at").asc()],
            )
        )
        .filter(place=1)
        .values(
            "problem_id",
            "speedup",
            "roofline",
            team_id=team,
            team_name=F("submission__team__name"),
            team_slug=F("submission__team__slug"),
            finished_at=F("submission__finished_at"),
        )
    )
    return [dict(row) for row in ranked]


def mean_roofline(results: list[dict]) -> float | None:
    fractions = [r["roofline"] for r in results if r["roofline"] is not None]
    return sum(fractions) / len(fractions) if fractions else None


def leaderboard_rows(*, profile: str, category: str | None = None) -> list[Row]:
    return leaderboard(profile=profile, category=category).rows


def leaderboard(*, profile: str, category: str | None = None) -> Board:
    problems = list(Problem.objects.published().in_category(category).values_list("id", "category"))
    category_of = dict(problems)
    totals: dict[str, int] = defaultdict(int)
    for _, cat in problems:
        totals[cat] += 1
    columns = [CategoryColumn(c.value, c.label, totals[c.value]) for c in Category if totals[c]]
    board = Board(profile=profile, category=category, columns=columns)
    if not problems:
        return board

    per_team: dict[int, list[dict]] = defaultdict(list)
    for best in _best_results(profile=profile, problem_ids=list(category_of)):
        per_team[best["team_id"]].append(best)

    rows = [
        Row(
            team_name=BASELINE_NAME,
            team_slug="",
            score=Score.of([1.0] * len(problems), len(problems)),
            categories=[Score.of([1.0] * col.total, col.total) for col in columns],
            reached_at=None,
            is_baseline=True,
        )
    ]
    for results in per_team.values():
        by_category: dict[str, list[float | None]] = defaultdict(list)
        for best in results:
            by_category[category_of[best["problem_id"]]].append(best["speedup"])
        rows.append(
            Row(
                team_name=results[0]["team_name"],
                team_slug=results[0]["team_slug"],
                score=Score.of([b["speedup"] for b in results], len(problems)),
                categories=[Score.of(by_category[col.value], col.total) for col in columns],
                reached_at=max(b["finished_at"] for b in results),
                roofline=mean_roofline(results),
            )
        )
    # Among equal scores the earlier team wins; the baseline was there first of all.
    rows.sort(
        key=lambda r: (
            r.score.sort_key(),
            not r.is_baseline,
            r.reached_at.timestamp() if r.reached_at else 0.0,
            r.team_name,
        )
    )
    rank = 0
    for row in rows:
        if not row.is_baseline:
            rank += 1
            row.rank = rank
    board.rows = rows
    return board
