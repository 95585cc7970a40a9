"""Reads for operators: the queue per hardware profile and the numbers behind /metrics.

Each selector is one aggregate query, whatever the number of submissions: Prometheus
calls them at every scrape, and anyone may load the queue page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Min, Q, Sum

from evaluator.host.profiles import PROFILES
from portal.submissions.models import Submission

# Upper bounds (seconds) of the evaluation-duration histogram: a CPU host takes seconds,
# a whole catalog on GPUs tens of minutes, the hard limit is an hour.
DURATION_BUCKETS_S = (10, 30, 60, 120, 300, 600, 1200, 1800, 3600)


@dataclass(frozen=True)
class QueueRow:
    profile: str
    label: str
    queue: str
    queued: int
    running: int
    oldest_queued_at: datetime | None

    def oldest_wait_s(self, now: datetime) -> float | None:
        if self.oldest_queued_at is None:
            return None
        return max(0.0, (now - self.oldest_queued_at).total_seconds())


def queue_rows() -> list[QueueRow]:
    """One row per known profile (empty ones too), and any other profile still waiting."""
    counts: dict[str, dict[str, Any]] = {
        row["profile"]: dict(row)
        for row in Submission.objects.active()
        .values("profile")
        .annotate(
            queued=Count("id", filter=Q(status=Submission.Status.QUEUED)),
            running=Count("id", filter=Q(status=Submission.Status.RUNNING)),
            oldest=Min("queued_at", filter=Q(status=Submission.Status.QUEUED)),
        )
    }
    names = list(PROFILES) + sorted(set(counts) - set(PROFILES))
    rows = []
    for name in names:
        known = PROFILES.get(name)
        row = counts.get(name, {})
        rows.append(
            QueueRow(
                profile=name,
                label=known.label if known else name,
                queue=known.queue if known else "",
                queued=row.get("queued", 0),
                running=row.get("running", 0),
                oldest_queued_at=row.get("oldest"),
            )
        )
    return rows


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
