"""What evaluator hosts report, recorded with compare-and-set updates.

Every update names the attempt (evaluation_id) and the states it may move from, so a
redelivered or late message of an abandoned attempt changes nothing.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluator.contract import (
    ContractError,
    EvaluationOutcome,
    cap_log,
)
from evaluator.contract import (
    ProblemResult as ReportedResult,
)
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission

logger = logging.getLogger(__name__)

MESSAGE_CAP_CHARS = 4000


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
    if not redelivered:
        logger.info("start of evaluation %s dropped: not queued or running", eid)
    return bool(redelivered)


def evaluation_progress(*, evaluation_id: str, done: int, total: int, current: str) -> bool:
    """Record progress; it doubles as the heartbeat that keeps the sweeper away."""
    eid = _evaluation_uuid(evaluation_id)
    done, total = _count(done), _count(total)
    now = timezone.now()
    # A progress message may overtake the started one on a busy portal queue: it starts too.
    return bool(
        Submission.objects.filter(evaluation_id=eid, status__in=Submission.ACTIVE).update(
            status=Submission.Status.RUNNING,
            started_at=Coalesce("started_at", now),
            heartbeat_at=now,
            progress_done=done,
            progress_total=total,
            current_problem=str(current)[:80],
        )
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _error(value: float | None) -> float | None:
    # An infinite error is a fact worth showing; NaN is not a number to compare.
    return None if value is None or math.isnan(value) else value


def _json_safe(value: Any) -> Any:
    # jsonb has no NaN or Infinity: one such float (an infinite relative error in a case, a
    # roofline over a zero time) would make PostgreSQL refuse the whole finished message.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _case_rows(cases: list) -> list[dict[str, Any]]:
    return [{k: _json_safe(v) for k, v in asdict(case).items()} for case in cases]


def _flags(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise ContractError(f"flags: expected a list of strings, got {value!r}")
    # Unknown flags are kept (and keep the result off the leaderboard): a newer host may
    # know a check that this portal does not.
    return [f[:40] for f in value[:10]]


def _judged_version(submission: Submission, problem: Problem) -> int:
    # The version when the attempt was queued, not now: a bump while it ran makes its result
    # stale. A submission queued before versions were recorded falls back to today's.
    version = submission.problem_versions.get(problem.slug)
    return version if isinstance(version, int) and version > 0 else problem.version


def _result_rows(submission: Submission, reported: list[ReportedResult]) -> list[ProblemResult]:
    wanted = set(submission.problems)
    problems = Problem.objects.in_bulk(
        [r.slug for r in reported if r.slug in wanted], field_name="slug"
    )
    rows: dict[str, ProblemResult] = {}
    for result in reported:
        problem = problems.get(result.slug)
        if problem is None or result.slug in rows:
            logger.warning("submission %s: result for %r ignored", submission.pk, result.slug)
            continue
        rows[result.slug] = ProblemResult(
            submission=submission,
            problem=problem,
            problem_version=_judged_version(submission, problem),
            status=ProblemResult.Status(str(result.status)),
            world_size=result.world_size,
            message=result.message[:MESSAGE_CAP_CHARS],
            log=cap_log(result.log),
            time_us=_finite(result.time_us),
            ref_time_us=_finite(result.ref_time_us),
            speedup=_finite(result.speedup),
            max_abs_err=_error(result.max_abs_err),
            max_rel_err=_error(result.max_rel_err),
            roofline=_finite(result.roofline),
            flags=_flags(result.flags),
            cases=_case_rows(result.cases),
        )
    return list(rows.values())


def evaluation_finish(*, message: dict[str, Any]) -> bool:
    """RUNNING (or QUEUED) -> DONE or FAILED with every result, in one transaction.

    False when the attempt is not the current one or is already finished: a duplicate or
    late message changes nothing.
    """
    eid = _evaluation_uuid(message.get("evaluation_id"))
    try:
        outcome = EvaluationOutcome(message["outcome"])
    except (KeyError, ValueError):
        raise ContractError(f"unknown outcome {message.get('outcome')!r}") from None
    reported = [ReportedResult.from_json(r) for r in message.get("results") or []]
    status = (
        Submission.Status.DONE if outcome is EvaluationOutcome.DONE else Submission.Status.FAILED
    )
    now = timezone.now()
    with transaction.atomic():
        # The conditional UPDATE is the lock: a concurrent duplicate waits for it, then finds
        # the status changed and updates nothing.
        finished = Submission.objects.filter(
            evaluation_id=eid, status__in=Submission.ACTIVE
        ).update(
            status=status,
            reason=str(message.get("reason") or "")[:MESSAGE_CAP_CHARS],
            environment=message.get("environment") or {},
            finished_at=now,
            heartbeat_at=now,
            current_problem="",
        )
        if not finished:
            logger.info("finish of evaluation %s dropped: not the current attempt", eid)
            return False
        submission = Submission.objects.get(evaluation_id=eid)
        ProblemResult.objects.bulk_create(_result_rows(submission, reported))
    return True
