"""A team's standing (best results, score, history of fast_1) and its submissions."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from portal.accounts.models import Team
from portal.leaderboard.scoring import Score, Solved, fast_p_steps
from portal.leaderboard.selectors.board import CategoryColumn, _columns, _runs_on, leaderboard
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult, Submission


@dataclass(frozen=True)
class TeamBest:
    """A team's best counted result on one problem."""

    slug: str
    title: str
    category: str
    speedup: float | None
    time_us: float | None
    roofline: float | None
    reached_at: datetime
    speedup_low: float | None = None
    speedup_high: float | None = None

    @property
    def category_label(self) -> str:
        return Category(self.category).label


@dataclass
class TeamStanding:
    """What a team's public page shows for one hardware profile."""

    profile: str
    score: Score
    categories: list[tuple[CategoryColumn, Score]]  # categories the team has solved in
    best: list[TeamBest]  # in catalog order
    fast_1_history: list[tuple[datetime, float]]  # (when, fast_1 after that submission)
    curve: list[tuple[float, float]]
    rank: int | None
    teams: int


def _is_better(new: float | None, old: float | None) -> bool:
    return (new if new is not None else float("-inf")) > (old if old is not None else float("-inf"))


def team_standing(*, team: Team, profile: str) -> TeamStanding:
    """Best results, scores and the fast_1 history of one team; three or five queries.

    The history is scored against today's published problems and weights, so its last
    point is the team's fast_1 on the board.
    """
    published = [
        row[:-1]
        for row in Problem.objects.published()
        .in_catalog_order()
        .values_list("id", "slug", "title", "category", "weight", "profiles")
        if _runs_on(row[-1], profile)
    ]
    problems = {pid: (slug, title, cat, weight) for pid, slug, title, cat, weight in published}
    results = (
        ProblemResult.objects.counted(profile=profile)
        .passed()
        .unflagged()
        .filter(submission__team=team, problem_id__in=list(problems))
        .order_by("submission__finished_at", "id")
        .values_list(
            "problem_id",
            "speedup",
            "time_us",
            "roofline",
            "submission__finished_at",
            "speedup_low",
            "speedup_high",
        )
    )
    total_weight = sum(w for *_, w in published)
    best: dict[int, tuple] = {}  # TeamBest's fields from the speedup on
    history: list[tuple[datetime, float]] = []
    for problem_id, speedup, time_us, roofline, finished_at, low, high in results:
        if finished_at is None:  # never for a finished submission; keeps the types honest
            continue
        if problem_id not in best or _is_better(speedup, best[problem_id][0]):
            best[problem_id] = (speedup, time_us, roofline, finished_at, low, high)
        fast_1 = sum(problems[p][3] for p, b in best.items() if b[0] is not None and b[0] > 1)
        share = fast_1 / total_weight if total_weight else 0.0
        if history and history[-1][0] == finished_at:
            history[-1] = (finished_at, share)  # one point per submission
        elif not history or history[-1][1] != share:
            history.append((finished_at, share))

    solved = {pid: Solved(b[0], problems[pid][3], b[2]) for pid, b in best.items()}
    board = leaderboard(profile=profile)
    columns = _columns([(pid, cat, w) for pid, _, _, cat, w in published])
    by_category: dict[str, list[Solved]] = defaultdict(list)
    for pid, item in solved.items():
        by_category[problems[pid][2]].append(item)
    return TeamStanding(
        profile=profile,
        score=Score.of(list(solved.values()), total=len(published), total_weight=total_weight),
        categories=[
            (c, Score.of(by_category[c.value], total=c.total, total_weight=c.total_weight))
            for c in columns
            if by_category[c.value]
        ],
        best=[
            TeamBest(slug, title, cat, *best[pid])
            for pid, (slug, title, cat, _) in problems.items()
            if pid in best
        ],
        fast_1_history=history,
        curve=fast_p_steps(list(solved.values()), total_weight),
        rank=next((r.rank for r in board.rows if r.team_slug == team.slug and r.rank), None),
        teams=board.teams,
    )


@dataclass(frozen=True)
class HistoryEntry:
    """A submission as the public sees it: when, on what, and how it went; no code, no logs."""

    id: int
    created_at: datetime
    finished_at: datetime | None
    status: str
    status_label: str
    profile: str
    planned: int
    passed: int


def team_history(*, team: Team, limit: int = 50) -> list[HistoryEntry]:
    """The team's latest submissions with their count of passed problems; one query."""
    rows = (
        Submission.objects.for_team(team)
        .annotate(passed=Count("results", filter=Q(results__status=ProblemResult.Status.PASSED)))
        .values_list("id", "created_at", "finished_at", "status", "profile", "problems", "passed")
        .order_by("-created_at", "-id")[:limit]
    )
    return [
        HistoryEntry(
            sid,
            created,
            finished,
            status,
            Submission.Status(status).label,
            profile,
            len(planned or []),
            passed,
        )
        for sid, created, finished, status, profile, planned, passed in rows
    ]
