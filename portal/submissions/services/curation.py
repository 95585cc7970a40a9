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


def _rank(status: str, flags: list, created_at: datetime, finished_at: datetime) -> tuple:
    # The boards count a team's newest code (portal/leaderboard/scoring.py): its newest
    # trusted pass is the one to judge again, however fast an older one was; without a pass,
    # the latest attempt is the team's best guess.
    if status == ProblemResult.Status.PASSED and not flags:
        return (1, created_at.timestamp())
    return (0, finished_at.timestamp())


def problem_best_submissions(*, problem: Problem) -> list[Submission]:
    """Per team and hardware profile, the finished ranked submission whose code counts on
    the problem: its newest trusted pass, stale or not (disqualified ones left out: they never
    rank). Examples count apart, per label: an example never stands for its team's code.

    Judging an older, faster pass again instead would bring back, at the problem's new
    version, code that the team's newer code replaced on the boards.
    """
    rows = ProblemResult.objects.filter(
        problem=problem,
        submission__mode=Submission.Mode.RANKED,  # the others never count: nothing to redo
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
        "submission__created_at",
        "submission__finished_at",
    )
    best: dict[tuple[int | str, str], tuple[tuple, int]] = {}
    for sid, team_id, label, profile, status, flags, created_at, finished_at in rows:
        rank = (*_rank(status, flags, created_at, finished_at or timezone.now()), sid)
        key = (label or team_id, profile)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, sid)
    ids = {sid for _, sid in best.values()}
    return list(Submission.objects.filter(pk__in=ids).order_by("pk"))


def problem_reevaluate(*, problem: Problem, reason: str) -> list[int]:
    """Queue each team's counted submission of the problem again (a new attempt of the same
    submission, so its results are replaced, not doubled); returns the requeued ids."""
    requeued = [
        submission.pk
        for submission in problem_best_submissions(problem=problem)
        if submission_requeue(submission=submission, reason=reason)
    ]
    logger.info("problem %s: re-evaluating submissions %s", problem.slug, requeued)
    return requeued
