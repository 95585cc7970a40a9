"""Reads for operators: the queue per hardware profile and the numbers behind /metrics.

Each selector is a fixed number of aggregate queries, whatever the number of submissions:
Prometheus calls them at every scrape, and anyone may load the queue page. The queue is
every evaluation a host will run: submissions (examples and re-evaluations after a problem
changed included) and re-runs for the ranking, which have their own state (Rerun) and
occupy a host as long as any submission.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Min, Q, Sum

from evaluator.face import PROFILES
from portal.accounts.models import Team
from portal.submissions.models import Rerun, Submission

# Upper bounds (seconds) of the evaluation-duration histogram: a CPU host takes seconds,
# a whole catalog on GPUs tens of minutes, the hard limit is an hour.
DURATION_BUCKETS_S = (10, 30, 60, 120, 300, 600, 1200, 1800, 3600)


@dataclass(frozen=True)
class QueueRow:
    profile: str
    label: str
    queue: str
    queued: int  # evaluations waiting: submissions and re-runs
    running: int
    oldest_queued_at: datetime | None
    reruns_queued: int = 0  # of which re-runs for the ranking
    reruns_running: int = 0

    def oldest_wait_s(self, now: datetime) -> float | None:
        if self.oldest_queued_at is None:
            return None
        return max(0.0, (now - self.oldest_queued_at).total_seconds())


def _active_counts(queryset: Any, profile_field: str) -> dict[str, dict[str, Any]]:
    """Per profile: queued, running and the oldest queued_at of `queryset`'s active rows."""
    rows = (
        queryset.values(profile_field)
        .annotate(
            queued=Count("id", filter=Q(status="queued")),
            running=Count("id", filter=Q(status="running")),
            oldest=Min("queued_at", filter=Q(status="queued")),
        )
        .order_by()
    )
    return {row[profile_field]: row for row in rows}


def _earliest(*moments: datetime | None) -> datetime | None:
    present = [m for m in moments if m is not None]
    return min(present) if present else None


def queue_rows() -> list[QueueRow]:
    """One row per known profile (empty ones too), and any other profile still waiting;
    two queries."""
    submissions = _active_counts(Submission.objects.active(), "profile")
    reruns = _active_counts(Rerun.objects.active(), "submission__profile")
    names = list(PROFILES) + sorted((set(submissions) | set(reruns)) - set(PROFILES))
    rows = []
    for name in names:
        known = PROFILES.get(name)
        own, rerun = submissions.get(name, {}), reruns.get(name, {})
        rows.append(
            QueueRow(
                profile=name,
                label=known.label if known else name,
                queue=known.queue if known else "",
                queued=own.get("queued", 0) + rerun.get("queued", 0),
                running=own.get("running", 0) + rerun.get("running", 0),
                oldest_queued_at=_earliest(own.get("oldest"), rerun.get("oldest")),
                reruns_queued=rerun.get("queued", 0),
                reruns_running=rerun.get("running", 0),
            )
        )
    return rows


@dataclass(frozen=True)
class QueuePlace:
    """One of a team's evaluations in its profile's queue."""

    submission_id: int
    bundle_name: str
    profile: str
    status: str  # queued or running
    problem: str = ""  # a re-run's problem; "" for the submission's own evaluation
    position: int | None = None  # 1 = next to start; None while it runs
    host: str = ""
    mode: str = Submission.Mode.RANKED  # the submission's (a re-run is always ranked)

    @property
    def is_rerun(self) -> bool:
        return bool(self.problem)

    @property
    def place(self) -> str:
        """ "3rd in line"; "" while it runs."""
        if self.position is None:
            return ""
        n = self.position
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix} in line"

    def to_json(self) -> dict[str, Any]:
        return {
            "submission": self.submission_id,
            "bundle_name": self.bundle_name,
            "profile": self.profile,
            "status": self.status,
            "problem": self.problem or None,
            "position": self.position,
            "host": self.host or None,
            "mode": self.mode,
        }


def _ahead(
    profile: str, queued_at: datetime | None, *, submission_id: int = 0, rerun_id: int = 0
) -> int:
    """Evaluations of `profile` queued before this one (hosts take them in that order; at
    the same moment submissions first, then by id). One of the ids names this one."""
    if queued_at is None:
        return 0
    before = Q(queued_at__lt=queued_at)
    tied_submissions = Q(queued_at=queued_at) & (Q(id__lt=submission_id) if submission_id else Q())
    tied_reruns = Q(queued_at=queued_at, id__lt=rerun_id) if rerun_id else Q(pk__in=[])
    waiting = Submission.objects.filter(status=Submission.Status.QUEUED, profile=profile)
    reruns = Rerun.objects.filter(status=Rerun.Status.QUEUED, submission__profile=profile)
    return (
        waiting.filter(before | tied_submissions).count()
        + reruns.filter(before | tied_reruns).count()
    )


def submission_queue_place(submission: Submission) -> str:
    """ "3rd in line" for a queued submission (two queries); "" for any other."""
    if submission.status != Submission.Status.QUEUED:
        return ""
    ahead = _ahead(submission.profile, submission.queued_at, submission_id=submission.pk)
    return QueuePlace(
        submission.pk,
        submission.bundle_name,
        submission.profile,
        submission.status,
        position=ahead + 1,
    ).place


def team_queue_places(team: Team | None) -> list[QueuePlace]:
    """The team's queued and running evaluations, each with its place in its profile's
    queue; a few queries per evaluation (a team has at most PKB_MAX_ACTIVE_SUBMISSIONS
    submissions active, and re-runs only of its top entries)."""
    if team is None:
        return []
    places = []
    for sub in Submission.objects.for_team(team).active().order_by("queued_at", "id"):
        queued = sub.status == Submission.Status.QUEUED
        ahead = _ahead(sub.profile, sub.queued_at, submission_id=sub.pk) if queued else None
        places.append(
            QueuePlace(
                sub.pk,
                sub.bundle_name,
                sub.profile,
                sub.status,
                position=None if ahead is None else ahead + 1,
                host=sub.host,
                mode=sub.mode,
            )
        )
    reruns = (
        Rerun.objects.active()
        .filter(submission__team=team)
        .select_related("submission", "problem")
        .order_by("queued_at", "id")
    )
    for rerun in reruns:
        queued = rerun.status == Rerun.Status.QUEUED
        profile = rerun.submission.profile
        ahead = _ahead(profile, rerun.queued_at, rerun_id=rerun.pk) if queued else None
        places.append(
            QueuePlace(
                rerun.submission_id,
                rerun.submission.bundle_name,
                profile,
                rerun.status,
                problem=rerun.problem.slug,
                position=None if ahead is None else ahead + 1,
                host=rerun.host,
            )
        )
    return places


def submissions_per_state() -> dict[tuple[str, str], int]:
    """(profile, status) -> number of submissions, every status present (zeros included)."""
    counts = {
        (row["profile"], row["status"]): row["n"]
        for row in Submission.objects.values("profile", "status").annotate(n=Count("id"))
    }
    profiles = set(PROFILES) | {profile for profile, _ in counts}
    return {
        (profile, status): counts.get((profile, status), 0)
        for profile in sorted(profiles)
        for status in Submission.Status.values
    }


@dataclass(frozen=True)
class DurationHistogram:
    profile: str
    buckets: list[tuple[float, int]]  # (upper bound in seconds, cumulative count)
    count: int
    sum_s: float


def evaluation_durations() -> list[DurationHistogram]:
    """Per profile, how long finished evaluations ran (start to finish), as a cumulative
    histogram over every finished submission: results are never deleted, so it only grows,
    as Prometheus expects of a histogram."""
    duration = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    per_bucket = {
        f"le_{bound}": Count("id", filter=Q(duration__lte=timedelta(seconds=bound)))
        for bound in DURATION_BUCKETS_S
    }
    rows = (
        Submission.objects.filter(
            status__in=(Submission.Status.DONE, Submission.Status.FAILED),
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .annotate(duration=duration)
        .values("profile")
        .annotate(count=Count("id"), total=Sum("duration"), **per_bucket)
        .order_by("profile")
    )
    return [_histogram(dict(row)) for row in rows]


def _histogram(row: dict[str, Any]) -> DurationHistogram:
    return DurationHistogram(
        profile=row["profile"],
        buckets=[(float(b), row[f"le_{b}"]) for b in DURATION_BUCKETS_S],
        count=row["count"],
        sum_s=row["total"].total_seconds() if row["total"] else 0.0,
    )


def host_heartbeats() -> dict[tuple[str, str], datetime]:
    """(host, profile) -> the last heartbeat of each host now evaluating: what the sweeper
    watches; a host whose age keeps growing is stuck or gone."""
    rows = (
        Submission.objects.filter(status=Submission.Status.RUNNING)
        .exclude(host="")
        .values("host", "profile")
        .annotate(last=Max("heartbeat_at"))
    )
    return {(r["host"], r["profile"]): r["last"] for r in rows if r["last"] is not None}
