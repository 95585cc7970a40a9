from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.submissions.models import Submission
from portal.submissions.services.submissions import submission_requeue, submission_resend

logger = logging.getLogger(__name__)

# A queued submission may wait behind others on a busy queue; only after this many times the
# stall limit is it presumed lost (a Redis restart without persistence loses the queue).
LOST_AFTER_FACTOR = 4


@dataclass
class SweepReport:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)


def _fail_stalled(submission: Submission, *, now: datetime) -> bool:
    reason = (
        f"evaluation stalled {submission.attempts} times (last host {submission.host or 'unknown'})"
    )
    return bool(
        Submission.objects.filter(
            pk=submission.pk,
            evaluation_id=submission.evaluation_id,
            status=Submission.Status.RUNNING,
        ).update(status=Submission.Status.FAILED, reason=reason, finished_at=now)
    )


def submissions_sweep(*, now: datetime | None = None) -> SweepReport:
    """Requeue or fail evaluations whose host went silent; re-send queued ones presumed lost."""
    now = now or timezone.now()
    stuck_after = timedelta(seconds=settings.PKB_STUCK_AFTER_S)
    report = SweepReport()
    for submission in Submission.objects.stalled(heartbeat_before=now - stuck_after):
        if submission.attempts < settings.PKB_MAX_ATTEMPTS:
            reason = (
                f"Attempt {submission.attempts} stalled on host "
                f"{submission.host or 'unknown'}; queued again."
            )
            if submission_requeue(submission=submission, reason=reason):
                report.requeued.append(submission.pk)
        elif _fail_stalled(submission, now=now):
            report.failed.append(submission.pk)
    # Re-sent with the same evaluation_id, so that it keeps its place if the original message
    # was only slow: a copy that starts after the other finished is refused by
    # evaluation_start; two copies running at once both report, and the first finish counts.
    lost_before = now - LOST_AFTER_FACTOR * stuck_after
    for submission in Submission.objects.waiting_since(queued_before=lost_before):
        if submission_resend(submission=submission):
            report.resent.append(submission.pk)
    if report.requeued or report.failed or report.resent:
        logger.warning("sweep: %s", report)
    return report
