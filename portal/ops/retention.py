"""Retention: old submissions lose their logs and, where nothing needs it, their bundle.

Results (statuses, times, speedups, errors, messages) are kept for good: the leaderboard
and the teams' histories are made of them. What goes after PKB_RETENTION_DAYS:

- the captured logs of results of submissions finished before then;
- the stored bundle of such a submission, unless something may still need it: a ranked
  run's bundle that passed a problem (it ranks, may be re-judged after a version bump, and becomes
  public with the problem's solutions) or a team's best attempt at a problem (what a
  re-evaluation re-queues; services/curation.py). A deleted bundle's page says its file
  is gone;
- the files of such a submission's artifacts (a profile run's traces and tables): nothing
  ranks or re-judges them. Their rows stay, and the page says the files were deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from portal.problems.models import Problem
from portal.submissions.models import Artifact, ProblemResult, Submission
from portal.submissions.services import problem_best_submissions
from portal.submissions.services.artifacts import artifact_files_delete

logger = logging.getLogger(__name__)

FINISHED = (Submission.Status.DONE, Submission.Status.FAILED, Submission.Status.CANCELLED)


@dataclass
class RetentionReport:
    logs_cleared: int = 0
    bundles_deleted: list[int] = field(default_factory=list)
    artifacts_deleted: int = 0


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
    report.artifacts_deleted = _delete_artifacts(old)
    if report.logs_cleared or report.bundles_deleted or report.artifacts_deleted:
        logger.info(
            "retention (%d days): %d logs cleared, bundles of %s deleted, %d artifacts deleted",
            days,
            report.logs_cleared,
            report.bundles_deleted,
            report.artifacts_deleted,
        )
    return report


def _delete_artifacts(old: QuerySet[Submission]) -> int:
    rows = Artifact.objects.filter(submission__in=old).exclude(file="")
    names = list(rows.values_list("pk", "file"))
    # The rows first: a file whose deletion fails is an orphan on disk, never a row that
    # offers a download of nothing.
    Artifact.objects.filter(pk__in=[pk for pk, _ in names]).update(file="")
    artifact_files_delete(name for _, name in names)
    return len(names)
