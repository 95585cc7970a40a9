"""A team's standing (counted results, score, history of fast_1) and its submissions."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Q

from portal.accounts.models import Team
from portal.leaderboard.scoring import Score, Solved, fast_p, fast_p_steps
from portal.leaderboard.selectors.board import (
    CategoryColumn,
    category_columns,
    leaderboard,
    runs_on,
)
from portal.leaderboard.selectors.counted import (
    NUMBERS,
    Draw,
    code_key,
    draws_of,
    pooled,
    runs_of,
)
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult, Submission


@dataclass(frozen=True)
class TeamBest:
    """A team's counted result on one problem: its newest code's, pooled over its runs."""

    slug: str
    title: str
    category: str
    speedup: float | None
    time_us: float | None
    roofline: float | None
    reached_at: datetime
    speedup_low: float | None = None
    speedup_high: float | None = None
    run_count: int = 1  # runs of the code the numbers are the medians of

    @property
    def category_label(self) -> str:
        return Category(self.category).label


@dataclass
class TeamStanding:
    """What a team's public page shows for one hardware profile."""

    profile: str
    score: Score
    categories: list[tuple[CategoryColumn, Score]]  # categories the team has solved in
    best: list[TeamBest]  # counted results, in catalog order
    fast_1_history: list[tuple[datetime, float]]  # (when, fast_1 after that submission)
    curve: list[tuple[float, float]]
    rank: int | None
    teams: int
    rank_range: str | None = None  # "2-4" where the score is not separable from others'
    weighted: bool = False  # some problem in scope weighs other than 1: shares are not counts


@dataclass
class _Pool:
    """A team's results on one problem so far, for the walk through its history."""

    members: list[tuple] = field(default_factory=list)  # (created, sid, code, finished, draws)

    def counted(self) -> tuple[Draw, int, datetime | None]:
        """The pooled numbers of the newest code, its run count, when it first finished."""
        newest = max(self.members, key=lambda m: (m[0], m[1]))
        pool = [m for m in self.members if m[2] == newest[2]]
        draws = [d for m in pool for d in m[4]]
        finished = [m[3] for m in pool if m[3] is not None]
        return pooled(draws), len(draws), min(finished, default=None)


def _solved(numbers: Draw, weight: float) -> Solved:
    speedup, low, high, roofline = numbers[:4]
    return Solved(speedup, weight, roofline, low, high)


def team_standing(*, team: Team, profile: str) -> TeamStanding:
    """Counted results, scores and the fast_1 history of one team; three to six queries.

    The counted result per problem follows the boards' rule (selectors/counted.py): the
    newest code's, pooled over its runs. The history applies that rule after each
    submission, scored against today's published problems and weights, so its last point
    is the team's fast_1 on the board.
    """
    published = [
        row[:-1]
        for row in Problem.objects.published()
        .in_catalog_order()
        .values_list("id", "slug", "title", "category", "weight", "profiles")
        if runs_on(row[-1], profile)
    ]
    problems = {pid: (slug, title, cat, weight) for pid, slug, title, cat, weight in published}
    results = list(
        ProblemResult.objects.counted(profile=profile)
        .passed()
        .unflagged()
        .filter(submission__team=team, problem_id__in=list(problems))
        .order_by("submission__finished_at", "id")
        .values_list(
            "id",
            "problem_id",
            "code_digest",
            "submission_id",
            "submission__created_at",
            "submission__finished_at",
            "run_count",
            *NUMBERS,
        )
    )
    rerun = [row[0] for row in results if row[6] > 1]
    runs = runs_of(rerun) if rerun else {}
    total_weight = sum(w for *_, w in published)
    pools: dict[int, _Pool] = defaultdict(_Pool)
    counted: dict[int, tuple[Draw, int, datetime | None]] = {}
    history: list[tuple[datetime, float]] = []
    for rid, problem_id, digest, sid, created, finished_at, run_count, *numbers in results:
        if finished_at is None:  # never for a finished submission; keeps the types honest
            continue
        draws = draws_of(rid, tuple(numbers), run_count, runs)
        pools[problem_id].members.append((created, sid, code_key(digest, sid), finished_at, draws))
        counted[problem_id] = pools[problem_id].counted()
        share = fast_p(
            (_solved(n, problems[p][3]) for p, (n, _, _) in counted.items()), 1, total_weight
        )
        if history and history[-1][0] == finished_at:
            history[-1] = (finished_at, share)  # one point per submission
        elif not history or history[-1][1] != share:
            history.append((finished_at, share))

    solved = {pid: _solved(n, problems[pid][3]) for pid, (n, _, _) in counted.items()}
    board = leaderboard(profile=profile)
    columns = category_columns([(pid, cat, w) for pid, _, _, cat, w in published])
    by_category: dict[str, list[Solved]] = defaultdict(list)
    for pid, item in solved.items():
        by_category[problems[pid][2]].append(item)
    # The team's own row, never one of its model entries' (same team_slug); a disqualified
    # team has none even where the board was built before its disqualification (issue 40).
    row = next(
        (
            r
            for r in board.rows
            if r.team_slug == team.slug and r.rank and not r.is_entry and not r.is_example
        ),
        None,
    )
    if team.is_disqualified:
        row = None
    return TeamStanding(
        profile=profile,
        score=Score.of(list(solved.values()), total=len(published), total_weight=total_weight),
        categories=[
            (c, Score.of(by_category[c.value], total=c.total, total_weight=c.total_weight))
            for c in columns
            if by_category[c.value]
        ],
        best=[
            TeamBest(
                slug,
                title,
                cat,
                speedup=n[0],
                time_us=n[4],
                roofline=n[3],
                reached_at=reached,
                speedup_low=n[1],
                speedup_high=n[2],
                run_count=count,
            )
            for pid, (slug, title, cat, _) in problems.items()
            if pid in counted
            for n, count, reached in [counted[pid]]
            if reached is not None
        ],
        fast_1_history=history,
        curve=fast_p_steps(list(solved.values()), total_weight),
        rank=row.rank if row else None,
        teams=board.teams,
        rank_range=row.rank_range if row else None,
        weighted=board.weighted,
    )


@dataclass(frozen=True)
class HistoryEntry:
    """A submission as the public sees it: when, on what, and how it went; no code, no logs.

    Its badge comes from the `status_class` and `status_label` filters (templatetags
    results), as a submission's does on its own page and the Submit page: a done
    submission that passed nothing is "Done: none passed" there, never a green "Done".
    """

    id: int
    created_at: datetime
    finished_at: datetime | None
    status: str
    profile: str
    planned: int
    passed: int
    mode: str = Submission.Mode.RANKED
    # An entry's sample: its entry and number, shown instead of the mode.
    entry_name: str | None = None
    entry_slug: str | None = None
    sample_number: int | None = None

    @property
    def is_ranked(self) -> bool:
        return self.mode == Submission.Mode.RANKED

    def get_mode_display(self) -> str:
        return Submission.Mode(self.mode).label

    @property
    def passed_count(self) -> int:
        """The filters' name for it (the annotation on a list of submissions)."""
        return self.passed

    def get_status_display(self) -> str:
        return Submission.Status(self.status).label


def team_history(*, team: Team, viewer: Any = None, limit: int = 50) -> list[HistoryEntry]:
    """The team's latest submissions with their count of passed problems; one query. Its
    test, benchmark and profile runs only for its members and staff (`viewer`); others
    (and no viewer) see its ranked runs."""
    submissions = Submission.objects.for_team(team)
    submissions = submissions.shown_on_team_page(viewer or AnonymousUser())
    rows = (
        submissions.annotate(
            passed=Count("results", filter=Q(results__status=ProblemResult.Status.PASSED))
        )
        .values_list(
            "id", "created_at", "finished_at", "status", "profile", "problems", "passed", "mode",
            "entry_sample__entry__name", "entry_sample__entry__slug", "entry_sample__number",
        )
        .order_by("-created_at", "-id")[:limit]
    )  # fmt: skip
    return [
        HistoryEntry(sid, created, finished, status, profile, len(planned or []), passed, *rest)
        for sid, created, finished, status, profile, planned, passed, *rest in rows
    ]
