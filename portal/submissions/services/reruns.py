"""Re-runs for the ranking: a finished submission judged again on one problem, with fresh
seeds, each run kept beside the others; the result ranks by their medians.

One evaluation's median does not settle a 10% difference on shared GPU hosts (issue 14:
the same case read 172 us and 312 us in two runs), so the board's top entries are judged
again and ranked by the median of their runs. A re-run has an evaluation id of its own:
hosts derive every input seed from it (evaluator/judge/seeds.py), and the host's messages about
it reach `rerun_start`, `rerun_progress` and `rerun_finish` through the same tasks as a
submission's (services/evaluations.py hands them over).
"""

from __future__ import annotations

import logging
import statistics
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluator.face import EvaluationOutcome, EvaluationRequest, get_profile
from evaluator.face import ProblemResult as ReportedResult
from portal.problems.models import Problem
from portal.submissions import broker
from portal.submissions.models import ProblemResult, Rerun, ResultRun, Submission
from portal.submissions.services.confinement import confinement_flags, with_flags
from portal.submissions.services.reported import (
    MESSAGE_CAP_CHARS,
    REPORTED_FIELDS,
    reported_fields,
)

logger = logging.getLogger(__name__)

# Twice the evaluator's hard time limit (3600 s): a re-run is one problem in one task, and
# this limit holds without heartbeats, whichever way hosts report that they are alive.
STALL_AFTER_S = 2 * 3600


def _send_on_commit(rerun: Rerun, submission: Submission) -> None:
    def send() -> None:
        with submission.bundle.open("rb") as fh:
            data = fh.read()
        request = EvaluationRequest.build(
            evaluation_id=str(rerun.evaluation_id),
            submission_id=submission.pk,
            profile=submission.profile,
            bundle_name=submission.bundle_name,
            bundle=data,
            problems=[rerun.problem.slug],
        )
        # Re-runs are of ranked results: they wait out a host whose canary reads out of bounds.
        broker.send_evaluation(request, queue=get_profile(submission.profile).queue)

    # A failed send leaves the re-run queued; `reruns_sweep` fails it after the stall limit.
    transaction.on_commit(send, robust=True)


def rerun_queue(
    *, submission: Submission, problem: Problem, reason: str, requested_by: User | None = None
) -> Rerun | None:
    """Queue one more judged run of a finished submission's result on `problem`, or None
    when it has no such result, is no ranked run (a re-run is for the ranking, which the
    others never enter) or a re-run of it is already queued or running."""
    if submission.status != Submission.Status.DONE or not submission.is_ranked:
        return None
    if not ProblemResult.objects.filter(submission=submission, problem=problem).exists():
        return None
    rerun = Rerun(
        submission=submission,
        problem=problem,
        base_evaluation_id=submission.evaluation_id,
        problem_version=problem.version,
        reason=reason[:MESSAGE_CAP_CHARS],
        requested_by=requested_by,
        queued_at=timezone.now(),
    )
    try:
        with transaction.atomic():
            # The partial unique constraint is the lock: one active re-run per result.
            rerun.save()
            _send_on_commit(rerun, submission)
    except IntegrityError:
        return None
    logger.info("re-run %s queued: #%s on %s", rerun.evaluation_id, submission.pk, problem.slug)
    return rerun


def first_run(result: ProblemResult, *, judged_at: datetime) -> ResultRun:
    """A result's first judged run, by its submission's attempt (unsaved)."""
    submission = result.submission
    return ResultRun(
        result=result,
        evaluation_id=submission.evaluation_id,
        judged_at=judged_at,
        host=submission.host,
        **{name: getattr(result, name) for name in ("problem_version", *REPORTED_FIELDS)},
    )


def _uuid(value: str | uuid.UUID) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def rerun_start(*, evaluation_id: str | uuid.UUID, host: str) -> bool:
    """QUEUED -> RUNNING, or a redelivery to the running re-run; False when the id names no
    active re-run."""
    eid, now, host = _uuid(evaluation_id), timezone.now(), host[:200]
    started = Rerun.objects.filter(evaluation_id=eid, status=Rerun.Status.QUEUED).update(
        status=Rerun.Status.RUNNING, started_at=now, heartbeat_at=now, host=host
    )
    if started:
        return True
    running = Rerun.objects.filter(evaluation_id=eid, status=Rerun.Status.RUNNING)
    return bool(running.update(heartbeat_at=now, host=host))


def rerun_progress(*, evaluation_id: str | uuid.UUID) -> bool:
    """A heartbeat of an active re-run; it starts it too if it overtook the start."""
    now = timezone.now()
    active = Rerun.objects.filter(evaluation_id=_uuid(evaluation_id), status__in=Rerun.ACTIVE)
    return bool(
        active.update(
            status=Rerun.Status.RUNNING, started_at=Coalesce("started_at", now), heartbeat_at=now
        )
    )


def _fail(rerun: Rerun, reason: str) -> None:
    Rerun.objects.filter(pk=rerun.pk).update(
        status=Rerun.Status.FAILED, reason=reason[:MESSAGE_CAP_CHARS], finished_at=timezone.now()
    )
    logger.info("re-run %s failed: %s", rerun.evaluation_id, reason)


def rerun_finish(
    *,
    evaluation_id: str | uuid.UUID,
    outcome: EvaluationOutcome,
    reported: list[ReportedResult],
    reason: str = "",
    environment: Any = None,
) -> bool:
    """Record a re-run's judged run beside the result's others and rank the result by their
    medians; False when the id names no active re-run (a duplicate or late message).

    A re-run that could not judge (the bundle failed to load, the host gave up) or whose
    submission was queued again meanwhile adds no run: it fails with the reason.
    """
    now = timezone.now()
    with transaction.atomic():
        # The conditional UPDATE is the lock, as for submissions: a duplicate waits, then
        # finds the re-run finished and updates nothing.
        claimed = Rerun.objects.filter(
            evaluation_id=_uuid(evaluation_id), status__in=Rerun.ACTIVE
        ).update(status=Rerun.Status.DONE, finished_at=now, heartbeat_at=now)
        if not claimed:
            return False
        rerun = Rerun.objects.select_related("submission", "problem").get(
            evaluation_id=_uuid(evaluation_id)
        )
        mine = [r for r in reported if r.slug == rerun.problem.slug]
        result = (
            ProblemResult.objects.select_for_update()
            .filter(submission_id=rerun.submission_id, problem_id=rerun.problem_id)
            .first()
        )
        if rerun.submission.evaluation_id != rerun.base_evaluation_id or result is None:
            _fail(rerun, "The submission was evaluated again meanwhile; this run is dropped.")
        elif outcome is not EvaluationOutcome.DONE or not mine:
            _fail(rerun, reason or "The host reported no result for this problem.")
        else:
            if not result.runs.exists():  # recorded before runs were: its numbers come first
                judged_at = rerun.submission.finished_at or rerun.submission.created_at
                first_run(result, judged_at=judged_at).save()
            ResultRun.objects.create(
                result=result,
                evaluation_id=rerun.evaluation_id,
                judged_at=now,
                host=rerun.host,
                problem_version=rerun.problem_version,
                # A run judged without the profile's sandbox flags the result it joins.
                **with_flags(
                    reported_fields(mine[0]),
                    confinement_flags(profile=rerun.submission.profile, environment=environment),
                ),
            )
            result_aggregate(result=result)
        _attempt_over_on_commit(rerun.evaluation_id, reason="finished")
    return True


def _attempt_over_on_commit(evaluation_id: uuid.UUID, *, reason: str) -> None:
    # A redelivered copy of the request is then skipped by hosts, a running one stopped.
    transaction.on_commit(lambda: broker.attempt_over(str(evaluation_id), reason=reason))


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _envelope(runs: list[ResultRun], speedup: float | None) -> tuple[float | None, float | None]:
    """From the lowest interval end of the runs to the highest: it shows how far the runs
    disagree, not only one run's noise. A run without an interval counts by its speedup;
    without any interval there is none."""
    if speedup is None or not any(r.speedup_low is not None for r in runs):
        return None, None
    lows = [r.speedup_low if r.speedup_low is not None else r.speedup for r in runs]
    highs = [r.speedup_high if r.speedup_high is not None else r.speedup for r in runs]
    low = min([v for v in lows if v is not None] + [speedup])
    high = max([v for v in highs if v is not None] + [speedup])
    return low, high


def _failure_message(run: ResultRun, first: ResultRun) -> str:
    if run.pk == first.pk:
        return run.message
    when = timezone.localtime(run.judged_at)
    return f"Re-run of {when:%Y-%m-%d %H:%M} (seed {run.seed}): {run.message}"[:MESSAGE_CAP_CHARS]


def result_aggregate(*, result: ProblemResult) -> None:
    """Set the result from its runs at its problem version: the medians of the passed runs'
    times and speedups, failed and flagged if any run was (a kernel that fails on one draw
    of inputs is not correct, and a doubt cast on one run is cast on the kernel)."""
    runs = [
        r
        for r in result.runs.order_by("judged_at", "id")
        if r.problem_version == result.problem_version
    ]
    if not runs:
        return
    first = runs[0]
    passed = [r for r in runs if r.status == ProblemResult.Status.PASSED]
    failed = [r for r in runs if r.status != ProblemResult.Status.PASSED]
    speedup = _median(r.speedup for r in passed)
    low, high = _envelope(passed, speedup)
    shown = failed[-1] if failed else first
    ProblemResult.objects.filter(pk=result.pk).update(
        status=shown.status,
        message=_failure_message(shown, first),
        log=shown.log,
        time_us=_median(r.time_us for r in passed),
        ref_time_us=_median(r.ref_time_us for r in passed),
        speedup=speedup,
        speedup_low=low,
        speedup_high=high,
        roofline=_median(r.roofline for r in passed),
        # A failed result shows its failed run's message, so its errors (the element the
        # message names, docs/architecture.md "Errors"); a pass the largest of the runs'.
        max_abs_err=shown.max_abs_err if failed else _worst(r.max_abs_err for r in runs),
        max_rel_err=shown.max_rel_err if failed else _worst(r.max_rel_err for r in runs),
        flags=list(dict.fromkeys(f for r in runs for f in r.flags)),
        run_count=len(runs),
    )


def _worst(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def reruns_sweep(*, now: datetime | None = None) -> list[int]:
    """Fail re-runs silent for STALL_AFTER_S since their last heartbeat (or since queued).

    A re-run is optional: it is never queued again here; the next beat or an admin may ask
    for another. A late finish of a failed one is dropped."""
    now = now or timezone.now()
    failed = []
    stalled = Rerun.objects.stalled(heartbeat_before=now - timedelta(seconds=STALL_AFTER_S))
    for rerun in stalled:
        changed = Rerun.objects.filter(pk=rerun.pk, status__in=Rerun.ACTIVE).update(
            status=Rerun.Status.FAILED,
            reason=f"The re-run stalled (last host {rerun.host or 'none'}).",
            finished_at=now,
        )
        if changed:
            failed.append(rerun.pk)
            _attempt_over_on_commit(rerun.evaluation_id, reason="stalled")
    if failed:
        logger.warning("re-runs failed after stalling: %s", failed)
    return failed
