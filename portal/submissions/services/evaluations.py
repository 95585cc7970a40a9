"""What evaluator hosts report, recorded with compare-and-set updates.

Every update names the attempt (evaluation_id) and the states it may move from, so a
redelivered or late message of an abandoned attempt changes nothing.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluator.face import (
    FAULT_SANDBOX,
    ContractError,
    EvaluationOutcome,
)
from evaluator.face import (
    ProblemResult as ReportedResult,
)
from portal.problems.models import Problem
from portal.submissions import broker
from portal.submissions.models import ProblemResult, ProvisionalResult, ResultRun, Submission
from portal.submissions.services.artifacts import (
    artifact_files_delete,
    artifacts_keep,
    artifacts_read,
)
from portal.submissions.services.confinement import confinement_flags, with_flags
from portal.submissions.services.notifications import submission_judged_mail
from portal.submissions.services.reported import MESSAGE_CAP_CHARS, json_safe, reported_fields
from portal.submissions.services.reruns import (
    first_run,
    rerun_finish,
    rerun_progress,
    rerun_start,
)
from portal.submissions.services.review import review_flags
from portal.submissions.services.submissions import submission_requeue

logger = logging.getLogger(__name__)


def _evaluation_uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ContractError(f"evaluation_id {value!r} is not a UUID") from None


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContractError(f"expected a count, got {value!r}")
    return value


def evaluation_start(*, evaluation_id: str, host: str) -> bool:
    """QUEUED -> RUNNING. True when the host should evaluate (a redelivery of the running
    attempt included); False when the attempt was requeued, cancelled or is finished."""
    eid = _evaluation_uuid(evaluation_id)
    now = timezone.now()
    host = host[:200]
    started = Submission.objects.filter(evaluation_id=eid, status=Submission.Status.QUEUED).update(
        status=Submission.Status.RUNNING, started_at=now, heartbeat_at=now, host=host
    )
    if started:
        return True
    redelivered = Submission.objects.filter(
        evaluation_id=eid, status=Submission.Status.RUNNING
    ).update(heartbeat_at=now, host=host)
    if redelivered:
        return True
    # Not a submission's attempt: perhaps a re-run for the ranking (services/reruns.py).
    if rerun_start(evaluation_id=eid, host=host):
        return True
    logger.info("start of evaluation %s dropped: not queued or running", eid)
    return False


def _phase(value: Any) -> str:
    # Unknown phases (a newer host's) read as no phase: the page says "running".
    return value if value in Submission.Phase.values else Submission.Phase.UNKNOWN


def evaluation_progress(
    *,
    evaluation_id: str,
    done: int,
    total: int,
    current: str,
    phase: Any = "",
    result: Any = None,
) -> bool:
    """Record progress; it doubles as the heartbeat that keeps the sweeper away. `result`
    (the problem just judged, as JSON) is kept as a provisional result for the page."""
    eid = _evaluation_uuid(evaluation_id)
    done, total = _count(done), _count(total)
    now = timezone.now()
    # A progress message may overtake the started one on a busy portal queue: it starts too.
    updated = Submission.objects.filter(evaluation_id=eid, status__in=Submission.ACTIVE).update(
        status=Submission.Status.RUNNING,
        started_at=Coalesce("started_at", now),
        heartbeat_at=now,
        progress_done=done,
        progress_total=total,
        current_problem=str(current)[:80],
        progress_phase=_phase(phase),
    )
    if updated and result is not None:
        _keep_provisional(eid, result)
    return bool(updated) or rerun_progress(evaluation_id=eid)


def _keep_provisional(eid: uuid.UUID, data: Any) -> None:
    """Keep one problem's result reported mid-evaluation, for the page only (the boards
    read ProblemResult of finished submissions alone). A malformed one is dropped: the
    progress it came with is still recorded, and the finished message carries it again."""
    try:
        reported = ReportedResult.from_json(data)
        fields = reported_fields(reported)
    except (ContractError, TypeError) as exc:
        logger.warning("evaluation %s: provisional result dropped: %s", eid, exc)
        return
    with transaction.atomic():
        # Locked, so that the finish (which deletes these) is either done, and this attempt
        # no longer active, or waits until this one is kept.
        submission = (
            Submission.objects.select_for_update()
            .filter(evaluation_id=eid, status__in=Submission.ACTIVE)
            .first()
        )
        if submission is None or reported.slug not in submission.problems:
            return
        ProvisionalResult.objects.bulk_create(
            [
                ProvisionalResult(
                    submission=submission,
                    evaluation_id=eid,
                    slug=reported.slug,
                    fields=json_safe({**fields, "status": str(fields["status"])}),
                )
            ],
            ignore_conflicts=True,  # a redelivered message
        )


def _judged_version(submission: Submission, problem: Problem) -> int:
    # The version when the attempt was queued, not now: a bump while it ran makes its result
    # stale. A submission queued before versions were recorded falls back to today's.
    version = submission.problem_versions.get(problem.slug)
    return version if isinstance(version, int) and version > 0 else problem.version


def _code_digest(submission: Submission, slug: str) -> str:
    digest = (submission.code_digests or {}).get(slug)
    return digest if isinstance(digest, str) else ""


def _result_rows(submission: Submission, reported: list[ReportedResult]) -> list[ProblemResult]:
    wanted = set(submission.problems)
    # Judged without the sandbox its profile requires: every result is kept, flagged.
    unconfined = confinement_flags(profile=submission.profile, environment=submission.environment)
    problems = Problem.objects.in_bulk(
        [r.slug for r in reported if r.slug in wanted], field_name="slug"
    )
    rows: dict[str, ProblemResult] = {}
    for result in reported:
        problem = problems.get(result.slug)
        if problem is None or result.slug in rows:
            logger.warning("submission %s: result for %r ignored", submission.pk, result.slug)
            continue
        review = result.review
        rows[result.slug] = ProblemResult(
            submission=submission,
            problem=problem,
            problem_version=_judged_version(submission, problem),
            code_digest=_code_digest(submission, problem.slug),
            review=review,
            **with_flags(reported_fields(result), [*unconfined, *review_flags(review)]),
        )
    return list(rows.values())


def _record(submission: Submission, reported: list[ReportedResult], *, now: datetime) -> None:
    results = ProblemResult.objects.bulk_create(_result_rows(submission, reported))
    submission.provisional_results.all().delete()  # shown until now; these count
    ResultRun.objects.bulk_create([first_run(r, judged_at=now) for r in results])
    eid = str(submission.evaluation_id)
    # A copy of the request redelivered later (its host died before acknowledging it) is
    # then skipped by the host rather than judged again.
    transaction.on_commit(lambda: broker.attempt_over(eid, reason="finished"))
    # After the commit, so that the mail never says more than the page shows, and robust:
    # the results are recorded whatever the mail server does.
    transaction.on_commit(lambda: submission_judged_mail(submission_id=submission.pk), robust=True)


def _retried_elsewhere(eid: uuid.UUID) -> bool:
    """A host that could not confine bundle code (the message's "fault" says so; never its
    reason's text, which may hold a bundle's) judged nothing, through no fault of the
    bundle or of the other hosts: the submission is queued again, as a new attempt, while
    attempts are left (PKB_MAX_ATTEMPTS, as for a stalled host). That host's canary holds
    its work meanwhile (evaluator/host/canary.py), so another worker of the profile takes
    it. False when no attempt is left: the failure is recorded."""
    submission = Submission.objects.filter(
        evaluation_id=eid, status__in=Submission.ACTIVE, attempts__lt=settings.PKB_MAX_ATTEMPTS
    ).first()
    if submission is None:
        return False
    why = (
        f"Attempt {submission.attempts} met a host whose sandbox could not start "
        f"({submission.host or 'unknown'}); queued again for another worker."
    )
    return submission_requeue(submission=submission, reason=why)


def evaluation_finish(*, message: dict[str, Any]) -> bool:
    """RUNNING (or QUEUED) -> DONE or FAILED with every result and artifact, in one
    transaction.

    False when the attempt is not the current one or is already finished: a duplicate or
    late message changes nothing.
    """
    eid = _evaluation_uuid(message.get("evaluation_id"))
    try:
        outcome = EvaluationOutcome(message["outcome"])
    except (KeyError, ValueError):
        raise ContractError(f"unknown outcome {message.get('outcome')!r}") from None
    reported = [ReportedResult.from_json(r) for r in message.get("results") or []]
    artifacts = artifacts_read(evaluation_id=eid, data=message.get("artifacts"))
    reason = str(message.get("reason") or "")[:MESSAGE_CAP_CHARS]
    status = (
        Submission.Status.DONE if outcome is EvaluationOutcome.DONE else Submission.Status.FAILED
    )
    # A host fails a whole evaluation only for its own reasons: the bundle passed the same
    # checks at upload, and whatever its code does wrong (a compile error, a crash, a hang)
    # is a problem's result in a DONE outcome. So a FAILED outcome (a host of another
    # profile, the evaluator's exception, its time limit) is the platform's fault.
    platform_fault = outcome is EvaluationOutcome.FAILED
    if platform_fault and message.get("fault") == FAULT_SANDBOX and _retried_elsewhere(eid):
        return True
    now = timezone.now()
    stored: list[str] = []
    try:
        with transaction.atomic():
            # The conditional UPDATE is the lock: a concurrent duplicate waits for it, then
            # finds the status changed and updates nothing.
            finished = Submission.objects.filter(
                evaluation_id=eid, status__in=Submission.ACTIVE
            ).update(
                status=status,
                reason=reason,
                platform_fault=platform_fault,
                environment=message.get("environment") or {},
                finished_at=now,
                heartbeat_at=now,
                current_problem="",
            )
            if finished:
                submission = Submission.objects.get(evaluation_id=eid)
                _record(submission, reported, now=now)
                stored = artifacts_keep(submission=submission, artifacts=artifacts)
                return True
    except BaseException:
        artifact_files_delete(stored)  # their rows went with the transaction
        raise
    # Not a submission's attempt: perhaps a re-run for the ranking (services/reruns.py).
    if rerun_finish(
        evaluation_id=eid,
        outcome=outcome,
        reported=reported,
        reason=reason,
        environment=message.get("environment"),
    ):
        return True
    logger.info("finish of evaluation %s dropped: not the current attempt", eid)
    return False
