"""The sweeper (a beat task every PKB_SWEEP_INTERVAL_S): what heals the queue.

- A running evaluation whose heartbeats stopped for PKB_STUCK_AFTER_S is queued again as a
  new attempt (or failed after PKB_MAX_ATTEMPTS); hosts are told the old attempt is over.
  One whose host already handed its result to the broker is left to be recorded.
- A queued submission is sent again only when the broker no longer holds its request (its
  sent marker is gone: a restart without persistence, a send that failed), never because
  the queue is long; within 3 heartbeats and a sweep.
- A queued submission whose hardware profile has had no worker for PKB_NO_WORKER_WAIT_S
  fails with that reason.

Both failures are the platform's, never the bundle's: they are marked so
(`Submission.platform_fault`) and give the team its quota's slot back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from evaluator.face import get_profile
from portal.submissions import broker
from portal.submissions.models import Submission
from portal.submissions.services.submissions import submission_requeue, submission_resend

logger = logging.getLogger(__name__)


@dataclass
class SweepReport:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)


def _fail(submission: Submission, *, status: str, reason: str, now: datetime) -> bool:
    failed = Submission.objects.filter(
        pk=submission.pk, evaluation_id=submission.evaluation_id, status=status
    ).update(status=Submission.Status.FAILED, reason=reason, finished_at=now, platform_fault=True)
    if failed:
        broker.attempt_over(str(submission.evaluation_id), reason="failed")
    return bool(failed)


def _sweep_stalled(report: SweepReport, *, now: datetime) -> None:
    stuck_after = timedelta(seconds=settings.PKB_STUCK_AFTER_S)
    stalled = list(Submission.objects.stalled(heartbeat_before=now - stuck_after))
    # A host that finished is silent too: its result waits in the broker for a portal
    # worker (one may have died recording it; Redis hands it out again).
    in_flight = broker.results_in_flight([str(s.evaluation_id) for s in stalled])
    if in_flight is None:
        return  # the broker cannot say; nothing could be sent now anyway
    for submission in stalled:
        if str(submission.evaluation_id) in in_flight:
            continue
        host = submission.host or "unknown"
        if submission.attempts < settings.PKB_MAX_ATTEMPTS:
            reason = f"Attempt {submission.attempts} stalled on host {host}; queued again."
            if submission_requeue(submission=submission, reason=reason):
                report.requeued.append(submission.pk)
        elif _fail(
            submission,
            status=Submission.Status.RUNNING,
            reason=f"evaluation stalled {submission.attempts} times (last host {host})",
            now=now,
        ):
            report.failed.append(submission.pk)


def _resend_lost(report: SweepReport, *, now: datetime) -> None:
    # The grace covers the moment between the row's commit and the marker's write (a send
    # slower than that is sent twice, and the host's claim keeps the copy from running).
    grace = timedelta(seconds=3 * settings.PKB_HEARTBEAT_S)
    waiting = [
        s
        for s in Submission.objects.waiting_since(queued_before=now - grace)
        if s.pk not in report.requeued  # sent a moment ago, on this sweep's commit
    ]
    held = broker.messages_held([str(s.evaluation_id) for s in waiting])
    if held is None:
        return  # the broker cannot say: sending everything again would double the queue
    for submission in waiting:
        # Same evaluation_id: if the request was only mislaid, the host that takes the
        # second copy finds the first one's claim and steps aside.
        if str(submission.evaluation_id) not in held and submission_resend(submission=submission):
            report.resent.append(submission.pk)


def _fail_workerless(report: SweepReport, *, now: datetime) -> None:
    wait = timedelta(seconds=settings.PKB_NO_WORKER_WAIT_S)
    waiting = list(Submission.objects.waiting_since(queued_before=now - wait))
    seen = broker.workers_last_seen({s.profile for s in waiting})
    if not waiting or seen is None:
        return
    for submission in waiting:
        last = seen.get(submission.profile)
        if last is not None and last >= (now - wait).timestamp():
            continue  # a worker was there: the queue is only long
        label = get_profile(submission.profile).label
        minutes = max(1, round(wait.total_seconds() / 60))
        reason = (
            f"Waited {minutes} min for a {submission.profile} worker ({label}) and none "
            "was connected; submit again when one is."
        )
        if _fail(submission, status=Submission.Status.QUEUED, reason=reason, now=now):
            report.failed.append(submission.pk)


def submissions_sweep(*, now: datetime | None = None) -> SweepReport:
    """Requeue or fail evaluations whose host went silent; re-send requests the broker lost;
    fail submissions no worker can take."""
    now = now or timezone.now()
    report = SweepReport()
    _sweep_stalled(report, now=now)
    _fail_workerless(report, now=now)
    _resend_lost(report, now=now)
    if report.requeued or report.failed or report.resent:
        logger.warning("sweep: %s", report)
    return report
