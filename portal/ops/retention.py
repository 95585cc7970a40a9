"""Retention: old submissions lose their logs and, where nothing needs it, their bundle.

Results (statuses, times, speedups, errors, messages) are kept for good: the leaderboard
and the teams' histories are made of them. What goes after PKB_RETENTION_DAYS:

- the captured logs of results of submissions finished before then;
- the stored bundle of such a submission, unless something may still need it: a ranked
  run's bundle that passed a problem (it ranks, may be re-judged after a version bump, and becomes
  public with the problem's solutions) or a team's best attempt at a problem (what a
  re-evaluation re-queues; services/curation.py). A deleted bundle's page says its file
  is gone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import problem_best_submissions

logger = logging.getLogger(__name__)

FINISHED = (Submission.Status.DONE, Submission.Status.FAILED, Submission.Status.CANCELLED)


@dataclass
class RetentionReport:
    logs_cleared: int = 0
    bundles_deleted: list[int] = field(default_factory=list)


def _bundles_still_needed() -> set[int]:
    # A ranked pass: a test, benchmark or profile run never ranks, is never re-judged for
    # a version bump and never published.
    passed = set(
        ProblemResult.objects.filter(
            status=ProblemResult.Status.PASSED, submission__mode=Submission.Mode.RANKED
        ).values_list("submission_id", flat=True)
    )
    best = {
        submission.pk
        for problem in Problem.objects.all()
        for submission in problem_best_submissions(problem=problem)
    }
    return passed | best


def retention_apply(*, days: int, now: datetime | None = None) -> RetentionReport:
    """Clear logs and delete unneeded bundles of submissions finished `days` ago or more.

    Running it again changes nothing more; 0 days keeps everything.
    """
    report = RetentionReport()
    if days <= 0:
        return report
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = Submission.objects.filter(status__in=FINISHED, finished_at__lt=cutoff)
    report.logs_cleared = (
        ProblemResult.objects.filter(submission__in=old).exclude(log="").update(log="")
    )
    needed = _bundles_still_needed()
    for pk, name in old.exclude(Q(bundle="") | Q(pk__in=needed)).values_list("pk", "bundle"):
        storage = Submission._meta.get_field("bundle").storage
        if storage.exists(name):
            storage.delete(name)
            report.bundles_deleted.append(pk)
    if report.logs_cleared or report.bundles_deleted:
        logger.info(
            "retention (%d days): %d logs cleared, bundles of %s deleted",
            days,
            report.logs_cleared,
            report.bundles_deleted,
        )
    return report
