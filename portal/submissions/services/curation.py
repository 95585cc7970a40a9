"""Admins' writes on submissions: disqualify and reinstate, re-evaluate after a change."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services.submissions import SubmissionError, submission_requeue

logger = logging.getLogger(__name__)


def submission_disqualify(*, submission: Submission, reason: str) -> bool:
    """Keep the submission's results off the ranking; its team sees the reason.

    False when it was disqualified already (its reason is then updated)."""
    reason = reason.strip()
    if not reason:
        raise SubmissionError("A disqualification needs a reason that the team can read.")
    fresh = Submission.objects.filter(pk=submission.pk, disqualified_at__isnull=True).update(
        disqualified_at=timezone.now(), disqualification_reason=reason
    )
    if not fresh:
        Submission.objects.filter(pk=submission.pk).update(disqualification_reason=reason)
    return bool(fresh)


def submission_reinstate(*, submission: Submission) -> bool:
    """Undo a disqualification; False when the submission was not disqualified."""
    return bool(
        Submission.objects.filter(pk=submission.pk, disqualified_at__isnull=False).update(
            disqualified_at=None, disqualification_reason=""
        )
    )


def _rank(status: str, flags: list, speedup: float | None, finished_at: datetime) -> tuple:
    # A trusted pass beats anything else, the faster the better and, at equal speed, the
    # earlier; without a pass, the latest attempt is the team's best guess.
    if status == ProblemResult.Status.PASSED and not flags:
        return (1, speedup or 0.0, -finished_at.timestamp())
    return (0, 0.0, finished_at.timestamp())


def problem_best_submissions(*, problem: Problem) -> list[Submission]:
    """Per team and hardware profile, its best finished submission that tried the problem,
    and its best one judged against an older version of the problem when that is another
    (disqualified ones left out: they never rank). Examples count apart, per label: an
    example never stands for its team's best, and its own best stays current too.

    A stale result no longer ranks; without the second, a team whose best is a new, slower
    pass would never see its faster old one judged again.
    """
    rows = ProblemResult.objects.filter(
        problem=problem,
        submission__status=Submission.Status.DONE,
        submission__disqualified_at__isnull=True,
        submission__team__disqualified_at__isnull=True,
    ).values_list(
        "submission_id",
        "submission__team_id",
        "submission__example_label",
        "submission__profile",
        "status",
        "flags",
        "speedup",
        "submission__finished_at",
        "problem_version",
    )
    best: dict[tuple[int | str, str, bool], tuple[tuple, int]] = {}
    for sid, team_id, label, profile, status, flags, speedup, finished_at, version in rows:
        rank = _rank(status, flags, speedup, finished_at or timezone.now())
        owner = label or team_id
        keys = [(owner, profile, False)]
        if version != problem.version:
            keys.append((owner, profile, True))  # also the best among the stale ones
        for key in keys:
            if key not in best or rank > best[key][0]:
                best[key] = (rank, sid)
    ids = {sid for _, sid in best.values()}
    return list(Submission.objects.filter(pk__in=ids).order_by("pk"))


def problem_reevaluate(*, problem: Problem, reason: str) -> list[int]:
    """Queue each team's best submission of the problem again (a new attempt of the same
    submission, so its results are replaced, not doubled); returns the requeued ids."""
    requeued = [
        submission.pk
        for submission in problem_best_submissions(problem=problem)
        if submission_requeue(submission=submission, reason=reason)
    ]
    logger.info("problem %s: re-evaluating submissions %s", problem.slug, requeued)
    return requeued
