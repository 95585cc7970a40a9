"""Every attempt of entries at problems, with its outcome and its numbers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, FilteredRelation, Q, QuerySet

from portal.entries.models import EntryAttempt
from portal.leaderboard.scoring import Solved
from portal.leaderboard.selectors.counted import NUMBERS, draws_of, pooled, runs_of
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission

# An attempt's outcome: a result's status, or one of these.
PENDING, FLAGGED, NO_RESULT, STALE, DISQUALIFIED = (
    "pending",
    "flagged",
    "no_result",
    "stale",
    "disqualified",
)
FAILED, CANCELLED = Submission.Status.FAILED.value, Submission.Status.CANCELLED.value
NOT_JUDGED = {PENDING, STALE, FAILED, CANCELLED}


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of an entry at one problem, with what the export and the scores need."""

    entry_id: int
    sample_number: int
    attempt: int  # the entry's attempt number on this problem, 1..n
    submission_id: int
    profile: str
    problem_id: int
    slug: str
    category: str
    weight: float
    published: bool
    runs_on: list[str]
    problem_version: int | None  # the version it was (or will be) judged against
    current_version: int
    outcome: str
    status: str  # the result's status, or "" without a result
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    roofline: float | None = None
    time_us: float | None = None
    ref_time_us: float | None = None
    run_count: int = 0
    flags: list[str] = field(default_factory=list)
    message: str = ""
    submitted_at: datetime | None = None
    finished_at: datetime | None = None
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        return self.outcome not in NOT_JUDGED

    @property
    def passed(self) -> bool:
        return self.outcome == ProblemResult.Status.PASSED

    @property
    def solved(self) -> Solved:
        return Solved(self.speedup, self.weight, self.roofline, self.speedup_low, self.speedup_high)

    def faster_than(self, p: float) -> bool:
        """Passed with the speedup's interval above p: the board's fast_p rule."""
        lower = self.solved.lower
        return self.passed and lower is not None and lower > p


_ATTEMPT_COLUMNS = (
    "entry_id",
    "sample__number",
    "number",
    "sample__submission_id",
    "sample__submission__profile",
    "problem_id",
    "problem__slug",
    "problem__category",
    "problem__weight",
    "problem__status",
    "problem__profiles",
    "sample__submission__problem_versions",
    "problem__version",
    "sample__submission__status",
    "sample__submission__disqualified_at",
    "sample__submission__created_at",
    "sample__submission__finished_at",
    "sample__submission__environment",
    "found__id",
    "found__status",
    "found__problem_version",
    "found__flags",
    "found__message",
    "found__run_count",
    *(f"found__{n}" for n in NUMBERS),
)


def _attempts_query(entries: Iterable[int] | QuerySet) -> QuerySet:
    # The sample's result on the attempt's own problem, in the same query.
    found = FilteredRelation(
        "sample__submission__results",
        condition=Q(sample__submission__results__problem=F("problem")),
    )
    return (
        EntryAttempt.objects.filter(entry__in=entries)
        .annotate(found=found)
        .order_by("entry_id", "problem__slug", "number")
    )


def _outcome(status: str, disqualified: bool, result: dict, current: int) -> str:
    if status in Submission.ACTIVE:
        return PENDING
    if status != Submission.Status.DONE:
        return status  # failed or cancelled: not judged
    if result["id"] is None:
        return NO_RESULT
    if result["problem_version"] != current:
        return STALE
    if result["status"] == ProblemResult.Status.PASSED:
        if disqualified:
            return DISQUALIFIED
        return FLAGGED if result["flags"] else result["status"]
    return result["status"]


def entry_attempts(
    entries: Iterable[int] | QuerySet, *, profile: str | None = None
) -> list[AttemptRow]:
    """Every attempt of the entries (ids, or a queryset of them), on one profile or all,
    with its outcome and its numbers; one query, two when some result was re-run."""
    query = _attempts_query(entries)
    if profile is not None:
        query = query.filter(sample__submission__profile=profile)
    rows = list(query.values_list(*_ATTEMPT_COLUMNS))
    rerun = [row[18] for row in rows if row[18] is not None and (row[23] or 0) > 1]
    runs = runs_of(rerun) if rerun else {}
    attempts = []
    for row in rows:
        (entry_id, sample, number, sid, prof, pid, slug, category, weight, pstatus, profiles) = row[
            :11
        ]
        versions, current, status, disqualified_at, created, finished, environment = row[11:18]
        result = dict(
            zip(
                ("id", "status", "problem_version", "flags", "message", "run_count"),
                row[18:24],
                strict=True,
            )
        )
        numbers = row[24:]
        if result["id"] is not None and numbers[0] is not None:
            numbers = pooled(draws_of(result["id"], numbers, result["run_count"] or 1, runs))
        outcome = _outcome(status, disqualified_at is not None, result, current)
        attempts.append(
            AttemptRow(
                entry_id=entry_id,
                sample_number=sample,
                attempt=number,
                submission_id=sid,
                profile=prof,
                problem_id=pid,
                slug=slug,
                category=category,
                weight=weight,
                published=pstatus == Problem.Status.PUBLISHED,
                runs_on=profiles or [],
                problem_version=result["problem_version"] or (versions or {}).get(slug),
                current_version=current,
                outcome=outcome,
                status=result["status"] or "",
                **dict(zip(NUMBERS, numbers, strict=True)),
                run_count=result["run_count"] or 0,
                flags=result["flags"] or [],
                message=result["message"] or "",
                submitted_at=created,
                finished_at=finished,
                environment=environment or {},
            )
        )
    return attempts
