"""Reads of the entries app: attempts with their outcomes, pass@k scores, quotas, and the
entries' rows on the boards.

An attempt counts in its problem's n once judged: its submission is done and its result
is at the problem's current version (a sample judged against an older version waits for
the admins' "Start over", as a team's result does). A pass counts unflagged only, and not
when the sample is disqualified; its numbers are the medians over its judged runs, as a
team's counted result's are (selectors/counted.py). Queued, running, failed (the host,
not the sample) and cancelled attempts keep their declared slot and are not judged yet.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import F, FilteredRelation, Q, QuerySet
from django.utils import timezone

from portal.entries.models import Entry, EntryAttempt, Who
from portal.leaderboard.scoring import Score, Solved, Totals, pass_at_k
from portal.leaderboard.selectors.board import Board, Row
from portal.leaderboard.selectors.counted import NUMBERS, draws_of, pooled, runs_of
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.selectors import QUOTA_WINDOW, _clock

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


def who_argument(value: str | None) -> str:
    """A board's `who`; absent is all (the caller refuses values it does not know)."""
    return value or Who.ALL.value


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


# --- scores ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemScore:
    """An entry's samples on one problem: n judged, c passed, f of them faster than 1."""

    slug: str
    category: str
    weight: float
    sent: int  # attempts sent, judged or not
    n: int
    c: int
    f: int

    def at(self, k: int, count: int) -> float | None:
        """pass@k of `count` successes among the n judged; None until k of them are."""
        return pass_at_k(self.n, count, k) if self.n >= k else None


@dataclass(frozen=True)
class EntryScores:
    """pass@1, pass@k, fast_1@1 and fast_1@k over a scope of problems: each a weighted share
    of the scope, a problem without samples counting 0; None while some problem with
    samples has fewer than k judged (n < k) ones, whose estimate is not defined yet."""

    k: int
    pass_at_1: float | None
    pass_at_k: float | None
    fast_1_at_1: float | None
    fast_1_at_k: float | None
    problems: list[ProblemScore]
    total: int
    sent: int
    judged: int

    @property
    def complete(self) -> bool:
        return self.sent == self.judged and self.sent > 0


def _share(problems: list[ProblemScore], weights: float, k: int, fast: bool) -> float | None:
    value = 0.0
    for p in problems:
        if p.sent == 0:
            continue
        estimate = p.at(k, p.f if fast else p.c)
        if estimate is None:
            return None
        value += p.weight * estimate
    return value / weights if weights > 0 else 0.0


def problem_scores(attempts: Iterable[AttemptRow]) -> dict[int, ProblemScore]:
    by_problem: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in attempts:
        by_problem[a.problem_id].append(a)
    scores = {}
    for pid, rows in by_problem.items():
        judged = [a for a in rows if a.judged]
        scores[pid] = ProblemScore(
            slug=rows[0].slug,
            category=rows[0].category,
            weight=rows[0].weight,
            sent=len(rows),
            n=len(judged),
            c=sum(1 for a in judged if a.passed),
            f=sum(1 for a in judged if a.faster_than(1.0)),
        )
    return scores


def scope_of(profile: str, category: str | None = None) -> list[tuple[int, str, float]]:
    """The published problems a board of the profile (and category) ranks on: (id,
    category, weight), as build_leaderboard reads them."""
    rows = Problem.objects.published().in_category(category)
    return [
        (pid, cat, weight)
        for pid, cat, weight, profiles in rows.values_list("id", "category", "weight", "profiles")
        if not profiles or profile in profiles
    ]


def entry_scores(
    entry: Entry, attempts: list[AttemptRow], scope: list[tuple[int, str, float]]
) -> EntryScores:
    """The entry's scores over the scope, from its attempts on the scope's profile."""
    in_scope = {pid for pid, _, _ in scope}
    by_problem = problem_scores(a for a in attempts if a.problem_id in in_scope)
    problems = sorted(by_problem.values(), key=lambda p: (p.category, p.slug))
    weights = sum(w for _, _, w in scope)
    return EntryScores(
        k=entry.k,
        pass_at_1=_share(problems, weights, 1, fast=False),
        pass_at_k=_share(problems, weights, entry.k, fast=False),
        fast_1_at_1=_share(problems, weights, 1, fast=True),
        fast_1_at_k=_share(problems, weights, entry.k, fast=True),
        problems=problems,
        total=len(scope),
        sent=sum(p.sent for p in problems),
        judged=sum(p.n for p in problems),
    )


# --- the boards' rows ----------------------------------------------------------------------


def _expected_solved(attempts: list[AttemptRow], n: dict[int, int]) -> list[Solved]:
    """Each passed sample as a Solved of weight w/n: fast_p over them is fast_p@1."""
    return [a.solved._replace(weight=a.weight / n[a.problem_id]) for a in attempts if a.passed]


def _expected_score(
    attempts: list[AttemptRow], n: dict[int, int], *, total: int, total_weight: float
) -> Score:
    score = Score.of_totals(
        Totals.of(_expected_solved(attempts, n)), total=total, total_weight=total_weight
    )
    # The counts beside the shares: the expected number of problems one sample solves.
    solved = sum(1 / n[a.problem_id] for a in attempts if a.passed)
    faster = sum(1 / n[a.problem_id] for a in attempts if a.faster_than(1.0))
    # Half up, not Python's half to even: one of two samples is "1 of 8", as its share says.
    return dataclasses.replace(
        score, solved=math.floor(solved + 0.5), faster=math.floor(faster + 0.5)
    )


def _entry_row(entry: Entry, attempts: list[AttemptRow], board: Board) -> Row:
    judged = [a for a in attempts if a.judged]
    n = Counter(a.problem_id for a in judged)
    columns = board.columns
    total = sum(c.total for c in columns)
    total_weight = sum(c.total_weight for c in columns)
    finished = [a.finished_at for a in judged if a.finished_at is not None]
    return Row(
        team_name=entry.name,
        team_slug=entry.team.slug,
        score=_expected_score(judged, n, total=total, total_weight=total_weight),
        categories=[
            _expected_score(
                [a for a in judged if a.category == c.value],
                n,
                total=c.total,
                total_weight=c.total_weight,
            )
            for c in columns
        ],
        reached_at=max(finished, default=None),
        counted=tuple(_expected_solved(judged, n)),
        entry_slug=entry.slug,
        entry_kind=entry.kind,
    )


def entry_board_rows(*, profile: str, problem_ids: list[int], board: Board) -> list[Row]:
    """The rows of the entries with a judged sample on the board's problems; two queries,
    three when some sample's result was re-run."""
    entries = {e.pk: e for e in Entry.objects.in_good_standing().select_related("team")}
    if not entries:
        return []
    scope = set(problem_ids)
    by_entry: dict[int, list[AttemptRow]] = defaultdict(list)
    for attempt in entry_attempts(list(entries), profile=profile):
        if attempt.problem_id in scope:
            by_entry[attempt.entry_id].append(attempt)
    return [
        _entry_row(entries[eid], attempts, board)
        for eid, attempts in by_entry.items()
        if any(a.judged for a in attempts)
    ]


# --- quota and counts ----------------------------------------------------------------------


def entry_attempt_counts(entry: Entry) -> dict[str, int]:
    """Attempts sent per problem slug, judged or not, on any profile: what n limits."""
    rows = EntryAttempt.objects.filter(entry=entry).values_list("problem__slug", flat=True)
    return dict(Counter(rows))


@dataclass(frozen=True)
class EntryQuota:
    used: int  # samples sent in the last QUOTA_WINDOW
    limit: int
    next_slot_at: datetime | None  # when `used` drops below `limit`; None while below it
    now: datetime

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def next_slot_text(self) -> str:
        return _clock(self.next_slot_at, self.now) if self.next_slot_at else ""


def entry_quota(entry: Entry, *, now: datetime | None = None) -> EntryQuota:
    now = now or timezone.now()
    limit = settings.PKB_ENTRY_SAMPLES_PER_DAY
    times = list(
        entry.samples.filter(submission__created_at__gte=now - QUOTA_WINDOW)
        .order_by("submission__created_at")
        .values_list("submission__created_at", flat=True)
    )
    used = len(times)
    next_slot = times[used - limit] + QUOTA_WINDOW if used >= limit else None
    return EntryQuota(used=used, limit=limit, next_slot_at=next_slot, now=now)


# --- an entry's state, for its page, the API and pkb ------------------------------------


@dataclass(frozen=True)
class SampleLine:
    number: int
    batch_id: int
    submission_id: int
    status: str  # the submission's
    problems: list[str]
    passed: int  # its attempts that count as passed
    judged: int  # its attempts judged
    progress_done: int
    progress_total: int
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class EntryStatus:
    entry: Entry
    profile: str
    scores: EntryScores
    samples: list[SampleLine]
    attempts: list[AttemptRow]
    quota: EntryQuota
    batch_id: int | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Samples per submission status: queued, running, done, failed, cancelled."""
        found = Counter(s.status for s in self.samples)
        return {status: found.get(status, 0) for status in Submission.Status.values}

    @property
    def per_problem(self) -> list[tuple[ProblemScore, tuple[float | None, ...]]]:
        """Each problem's score with its pass@1, pass@k, fast_1@1 and fast_1@k."""
        k = self.entry.k
        return [
            (p, (p.at(1, p.c), p.at(k, p.c), p.at(1, p.f), p.at(k, p.f)))
            for p in self.scores.problems
        ]

    @property
    def finished(self) -> bool:
        """No sample is queued or running: a harness following the entry may stop."""
        return all(s.status not in Submission.ACTIVE for s in self.samples)


def _sample_lines(
    entry: Entry, attempts: list[AttemptRow], batch_id: int | None
) -> list[SampleLine]:
    samples = entry.samples.select_related("submission").order_by("number")
    if batch_id is not None:
        samples = samples.filter(batch_id=batch_id)
    by_sample: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in attempts:
        by_sample[a.sample_number].append(a)
    lines = []
    for sample in samples:
        sub = sample.submission
        mine = by_sample[sample.number]
        lines.append(
            SampleLine(
                number=sample.number,
                batch_id=sample.batch_id,
                submission_id=sub.pk,
                status=sub.status,
                problems=list(sub.problems),
                passed=sum(1 for a in mine if a.passed),
                judged=sum(1 for a in mine if a.judged),
                progress_done=sub.progress_done,
                progress_total=sub.planned_count,
                created_at=sub.created_at,
                finished_at=sub.finished_at,
            )
        )
    return lines


def entry_status(
    entry: Entry, *, profile: str | None = None, batch_id: int | None = None
) -> EntryStatus:
    """The entry's samples (of one batch, when given) and its scores on the profile's
    board (the site's submission profile by default); four queries."""
    profile = profile or settings.PKB_SUBMISSION_PROFILE
    attempts = entry_attempts([entry.pk], profile=profile)
    if batch_id is not None:
        numbers = set(entry.samples.filter(batch_id=batch_id).values_list("number", flat=True))
        mine = [a for a in attempts if a.sample_number in numbers]
    else:
        mine = attempts
    return EntryStatus(
        entry=entry,
        profile=profile,
        scores=entry_scores(entry, attempts, scope_of(profile)),
        samples=_sample_lines(entry, mine, batch_id),
        attempts=mine,
        quota=entry_quota(entry),
        batch_id=batch_id,
    )


def entries_with_scores(
    *, profile: str, kind: str | None = None
) -> list[tuple[Entry, EntryScores]]:
    """Every entry in good standing (of one kind, when given) with its scores on the
    profile's board, best pass@1 first; three queries."""
    entries = Entry.objects.in_good_standing().select_related("team")
    if kind:
        entries = entries.filter(kind=kind)
    by_id = {e.pk: e for e in entries}
    by_entry: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in entry_attempts(list(by_id), profile=profile) if by_id else []:
        by_entry[a.entry_id].append(a)
    scope = scope_of(profile)
    scored = [(e, entry_scores(e, by_entry[e.pk], scope)) for e in by_id.values()]
    return sorted(scored, key=lambda pair: (-(pair[1].pass_at_1 or 0.0), pair[0].name.lower()))


@dataclass(frozen=True)
class ProblemEntryRow:
    """An entry's samples on one problem, for the problem's page."""

    entry: Entry
    score: ProblemScore
    median_speedup: float | None  # of its passed samples: what a passing sample reaches

    @property
    def pass_at_1(self) -> float | None:
        return self.score.at(1, self.score.c)

    @property
    def pass_at_k(self) -> float | None:
        return self.score.at(self.entry.k, self.score.c)

    @property
    def fast_1_at_1(self) -> float | None:
        return self.score.at(1, self.score.f)

    @property
    def fast_1_at_k(self) -> float | None:
        return self.score.at(self.entry.k, self.score.f)


def problem_entry_rows(*, problem_id: int, profile: str) -> list[ProblemEntryRow]:
    """The entries with a judged sample of the problem on the profile, best pass@1 first;
    one query, two with entries (three when some sample was re-run)."""
    entries = {e.pk: e for e in Entry.objects.in_good_standing().select_related("team")}
    if not entries:
        return []
    by_entry: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in entry_attempts(list(entries), profile=profile):
        if a.problem_id == problem_id:
            by_entry[a.entry_id].append(a)
    rows = []
    for eid, attempts in by_entry.items():
        (score,) = problem_scores(attempts).values()
        if score.n == 0:
            continue
        speedups = sorted(a.speedup for a in attempts if a.passed and a.speedup is not None)
        median = statistics.median(speedups) if speedups else None
        rows.append(ProblemEntryRow(entries[eid], score, median))
    return sorted(rows, key=lambda r: (-(r.pass_at_1 or 0.0), r.entry.name.lower()))
