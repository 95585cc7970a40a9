"""An entry's state for its page, the API and pkb: samples, progress, scores, quota."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from portal.entries.models import Entry, EntryAttempt
from portal.entries.selectors.attempts import AttemptRow, entry_attempts
from portal.entries.selectors.scores import EntryScores, ProblemScore, entry_scores, scope_of
from portal.submissions.models import Submission
from portal.submissions.quotas import DAY as QUOTA_WINDOW
from portal.submissions.quotas import clock


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
        return clock(self.next_slot_at, self.now) if self.next_slot_at else ""


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
    stage: str = ""  # a running sample's, for its page: _stage


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
                stage=_stage(sub),
            )
        )
    return lines


def _stage(sub: Submission) -> str:
    """What a running sample does now, as the submission's page says: starting until its
    host reports, compiling, then its count; a count from the start read "0 / 8" before
    anything was compiled (issue 40)."""
    if sub.status != Submission.Status.RUNNING:
        return ""
    if sub.progress_phase == Submission.Phase.COMPILING:
        return "compiling"
    if not sub.progress_total:
        return "starting"
    return f"{sub.progress_done} / {sub.progress_total} judged"


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
