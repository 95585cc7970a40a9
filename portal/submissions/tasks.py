"""The portal's end of the contract: one message in, one service call.

A message that breaks the contract is logged and dropped: retrying cannot fix it.
Each recording task is acknowledged only after it ran (acks_late), and given back to the
queue if its worker process dies (reject_on_worker_lost); a worker killed outright leaves
the message unacknowledged, and Redis hands it out again after the visibility timeout. So
a result in flight is recorded by the next worker, never lost and never judged again. The
services are compare-and-set, so a message delivered twice changes nothing the second time.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from evaluator.face import (
    FINISHED_TASK,
    PROGRESS_TASK,
    STARTED_TASK,
    ContractError,
    read_message,
)
from portal.submissions.services import (
    evaluation_finish,
    evaluation_progress,
    evaluation_start,
    submissions_sweep,
)

logger = logging.getLogger(__name__)

SWEEP_TASK = "portal.sweep"
# A database that does not answer (a restart, a failover) is retried with backoff, below
# the visibility timeout; any other failure would be acknowledged and the message lost.
RECORDING: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 2,
    "retry_backoff_max": 30,
    "max_retries": 20,
}


@shared_task(name=STARTED_TASK, **RECORDING)
def evaluation_started(message: Any) -> bool | None:
    try:
        data = read_message(message, "evaluation started", ("host",))
        return evaluation_start(evaluation_id=data["evaluation_id"], host=str(data["host"]))
    except ContractError as exc:
        logger.error("dropped %s message: %s", STARTED_TASK, exc)
        return None


@shared_task(name=PROGRESS_TASK, **RECORDING)
def evaluation_progressed(message: Any) -> bool | None:
    try:
        data = read_message(message, "evaluation progress", ("done", "total", "current"))
        return evaluation_progress(
            evaluation_id=data["evaluation_id"],
            done=data["done"],
            total=data["total"],
            current=data["current"],
            # Optional: hosts before live progress send neither.
            phase=data.get("phase", ""),
            result=data.get("result"),
        )
    except ContractError as exc:
        logger.error("dropped %s message: %s", PROGRESS_TASK, exc)
        return None


@shared_task(name=FINISHED_TASK, **RECORDING)
def evaluation_finished(message: Any) -> bool | None:
    try:
        data = read_message(message, "evaluation finished", ("outcome", "results"))
        return evaluation_finish(message=data)
    except ContractError as exc:
        logger.error("dropped %s message: %s", FINISHED_TASK, exc)
        return None


@shared_task(name=SWEEP_TASK)
def sweep() -> dict[str, list[int]]:
    report = submissions_sweep()
    return {"requeued": report.requeued, "failed": report.failed, "resent": report.resent}
