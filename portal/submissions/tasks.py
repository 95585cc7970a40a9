"""The portal's end of the contract: one message in, one service call.

A message that breaks the contract is logged and dropped: retrying cannot fix it.
The services are compare-and-set, so a redelivered message (acks_late) changes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from evaluator.contract import (
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


@shared_task(name=STARTED_TASK, acks_late=True)
def evaluation_started(message: Any) -> bool | None:
    try:
        data = read_message(message, "evaluation started", ("host",))
        return evaluation_start(evaluation_id=data["evaluation_id"], host=str(data["host"]))
    except ContractError as exc:
        logger.error("dropped %s message: %s", STARTED_TASK, exc)
        return None


@shared_task(name=PROGRESS_TASK, acks_late=True)
def evaluation_progressed(message: Any) -> bool | None:
    try:
        data = read_message(message, "evaluation progress", ("done", "total", "current"))
        return evaluation_progress(
            evaluation_id=data["evaluation_id"],
            done=data["done"],
            total=data["total"],
            current=data["current"],
        )
    except ContractError as exc:
        logger.error("dropped %s message: %s", PROGRESS_TASK, exc)
        return None


@shared_task(name=FINISHED_TASK, acks_late=True)
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
