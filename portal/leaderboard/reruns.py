"""Re-runs for the ranking: the current top entries of a problem judged again with fresh
seeds, so that its board ranks them by the median of several runs (issue 14).

Asked for by admins (the problem admin's action, `manage.py rerun_top`) and, when
`PKB_RERUN_ENABLED` is set, by the beat every `PKB_RERUN_EVERY_S` (`tasks.rerun_top`).
Each re-run goes through `submissions.services.rerun_queue`: its own evaluation id, hence
its own seeds, and at most one at a time per result.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.models import User

from portal.leaderboard.selectors import problem_ranking
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Rerun, Submission
from portal.submissions.services import rerun_queue

logger = logging.getLogger(__name__)


def _profiles(problem: Problem) -> list[str]:
    """The hardware profiles with finished results on the problem: one board each."""
    rows = ProblemResult.objects.filter(
        problem=problem,
        submission__status=Submission.Status.DONE,
        submission__mode=Submission.Mode.RANKED,
    )
    return sorted(set(rows.values_list("submission__profile", flat=True)))


def problem_rerun_top(
    *,
    problem: Problem,
    top: int,
    reason: str,
    below_runs: int | None = None,
    requested_by: User | None = None,
) -> list[Rerun]:
    """Queue a re-run of each of the problem's `top` ranked entries, on every profile.

    `below_runs`: only entries with fewer judged runs than this (the beat's budget); None
    for all of them. An entry with a re-run already queued or running is left alone.
    """
    ids = [
        row.submission_id
        for profile in _profiles(problem)
        for row in problem_ranking(problem=problem, profile=profile)[:top]
        if row.submission_id is not None and (below_runs is None or row.run_count < below_runs)
    ]
    queued = []
    for submission in Submission.objects.filter(pk__in=ids).order_by("pk"):
        rerun = rerun_queue(
            submission=submission, problem=problem, reason=reason, requested_by=requested_by
        )
        if rerun is not None:
            queued.append(rerun)
    return queued


def reruns_for_ranking() -> list[Rerun]:
    """The beat's share: the top `PKB_RERUN_TOP` entries of every published problem, until
    each has `PKB_RERUN_RUNS` judged runs; nothing unless `PKB_RERUN_ENABLED`."""
    if not settings.PKB_RERUN_ENABLED:
        return []
    queued = []
    for problem in Problem.objects.published().in_catalog_order():
        queued += problem_rerun_top(
            problem=problem,
            top=settings.PKB_RERUN_TOP,
            below_runs=settings.PKB_RERUN_RUNS,
            reason="Judged again with fresh seeds for the ranking (periodic).",
        )
    if queued:
        logger.info("re-runs for the ranking queued: %s", [r.pk for r in queued])
    return queued
