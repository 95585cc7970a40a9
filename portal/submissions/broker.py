"""The portal's one door to the evaluator hosts: tests replace `send_evaluation`."""

from __future__ import annotations

from evaluator.contract import EVALUATE_TASK, EvaluationRequest
from portal.celery import app


def send_evaluation(request: EvaluationRequest, *, queue: str) -> None:
    app.send_task(EVALUATE_TASK, args=[request.to_json()], queue=queue)
