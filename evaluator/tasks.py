"""The evaluator's Celery side: the only module of evaluator/ that touches the broker.

A GPU host runs one worker bound to its hardware profile's queue, one evaluation at a time.
It receives `evaluator.evaluate` with an EvaluationRequest and reports back by sending
tasks, by name only, to the portal's queue. The portal runs its own Celery app.

    pkb-worker                      (or: python -m evaluator worker)

The task body is thin: `run_evaluation` holds the logic and takes its `send` function as
an argument, so it runs in tests without a broker.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing.process as mp_process
import socket
from collections.abc import Callable, Mapping
from typing import Any

import redis.exceptions
from celery import Celery
from kombu.exceptions import OperationalError

from evaluator.bundle import BundleError, read_bundle
from evaluator.contract import (
    EVALUATE_TASK,
    FINISHED_TASK,
    PORTAL_QUEUE,
    PROGRESS_TASK,
    STARTED_TASK,
    ContractError,
    EvaluationOutcome,
    EvaluationRequest,
    ProblemResult,
    finished_message,
    progress_message,
    started_message,
)
from evaluator.profiles import HardwareProfile, get_profile
from evaluator.runner import check_sandbox, evaluate_bundle
from evaluator.settings import Settings, load_settings, redis_url
from problems.registry import all_problems
from problems.spec import Problem

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT_S = 3300
HARD_TIME_LIMIT_S = 3600
# Redis re-delivers an unacknowledged task after this long; with acks_late a task is
# acknowledged when it ends, so this must outlast the longest task or it runs twice.
VISIBILITY_TIMEOUT_S = 7200
assert VISIBILITY_TIMEOUT_S > HARD_TIME_LIMIT_S > SOFT_TIME_LIMIT_S

# Errors of the broker connection, worth a retry; a bundle's failure never is.
INFRASTRUCTURE_ERRORS = (OperationalError, redis.exceptions.ConnectionError, ConnectionError)
SEND_RETRY_POLICY = {"max_retries": 5, "interval_start": 1, "interval_step": 2, "interval_max": 15}

Send = Callable[[str, dict[str, Any]], None]

# Taken at import, in the worker's main process, before the pool forks (see below).
_PLAIN_PROCESS = (
    mp_process.current_process()
    if type(mp_process.current_process()).__module__.startswith("multiprocessing")
    else None
)

app = Celery("evaluator")
app.conf.update(
    broker_url=redis_url(),
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
    task_soft_time_limit=SOFT_TIME_LIMIT_S,
    task_time_limit=HARD_TIME_LIMIT_S,
    broker_connection_retry_on_startup=True,
)


@functools.cache
def worker_settings() -> Settings:
    """This process's settings, read once (a generated seed secret must not change)."""
    return load_settings()


def send_to_portal(task_name: str, message: dict[str, Any]) -> None:
    app.send_task(
        task_name,
        args=[message],
        queue=PORTAL_QUEUE,
        retry=True,
        retry_policy=SEND_RETRY_POLICY,
    )


@app.task(
    name=EVALUATE_TASK,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=10,
    retry_backoff_max=300,
    max_retries=3,
)
def evaluate(request_json: dict[str, Any]) -> None:
    _allow_child_processes()
    run_evaluation(request_json, settings=worker_settings(), send=send_to_portal)


def _allow_child_processes() -> None:
    # Celery's prefork pool (billiard) installs its own daemonic Process object as the
    # standard library's current process. multiprocessing then refuses to start children
    # ("daemonic processes are not allowed to have children") and cannot pickle billiard's
    # authkey for a spawned child. We need the prefork pool, since it alone enforces the
    # task time limits, so the pool process gets back the standard library's own record of
    # the worker's main process. Orphans are not a risk: every rank asks the kernel for
    # SIGKILL when its parent dies (PR_SET_PDEATHSIG), and the runner kills them itself in
    # every other case.
    if _PLAIN_PROCESS is not None and mp_process.current_process() is not _PLAIN_PROCESS:
        mp_process._current_process = _PLAIN_PROCESS


def run_evaluation(
    request_json: Any,
    *,
    settings: Settings,
    send: Send,
    profile: HardwareProfile | None = None,
    problems: Mapping[str, Problem] | None = None,
) -> dict[str, Any]:
    """Evaluate one request, reporting started/progress/finished through `send`.

    Returns the finished message. Only `send`'s own errors (the broker) escape.
    """
    evaluation_id = _evaluation_id_of(request_json)
    try:
        request = EvaluationRequest.from_json(request_json)
    except ContractError as exc:
        return _fail(send, evaluation_id, f"bad evaluation request: {exc}")

    send(STARTED_TASK, started_message(evaluation_id=evaluation_id, host=socket.gethostname()))
    profile = profile or get_profile(settings.profile)
    if request.profile != profile.name:
        return _fail(
            send,
            evaluation_id,
            f"this host serves profile {profile.name!r}, not {request.profile!r}",
        )
    catalog = dict(problems) if problems is not None else {p.slug: p for p in all_problems()}
    try:
        bundle = read_bundle(request.bundle_name, request.bundle(), known_slugs=catalog)
    except (ContractError, BundleError) as exc:
        return _fail(send, evaluation_id, str(exc))

    def progress(done: int, total: int, current: str) -> None:
        message = progress_message(
            evaluation_id=evaluation_id, done=done, total=total, current=current
        )
        try:
            send(PROGRESS_TASK, message)
        except INFRASTRUCTURE_ERRORS:
            # Progress is a courtesy: losing one must not cost the evaluation.
            log.warning("progress message for %s lost", evaluation_id, exc_info=True)

    try:
        results, environment = evaluate_bundle(
            bundle,
            slugs=request.problems,
            profile=profile,
            settings=settings,
            evaluation_id=evaluation_id,
            on_progress=progress,
            problems=catalog,
        )
    except Exception as exc:  # a broken host, or Celery's soft time limit
        log.exception("evaluation %s failed", evaluation_id)
        return _fail(send, evaluation_id, f"the evaluator failed: {type(exc).__name__}: {exc}")
    return _finish(send, evaluation_id, EvaluationOutcome.DONE, results=results, env=environment)


def _evaluation_id_of(request_json: Any) -> str:
    value = request_json.get("evaluation_id") if isinstance(request_json, dict) else None
    return value if isinstance(value, str) else ""


def _fail(send: Send, evaluation_id: str, reason: str) -> dict[str, Any]:
    log.warning("evaluation %s failed: %s", evaluation_id or "(no id)", reason)
    return _finish(send, evaluation_id, EvaluationOutcome.FAILED, reason=reason)


def _finish(
    send: Send,
    evaluation_id: str,
    outcome: EvaluationOutcome,
    *,
    reason: str = "",
    results: list[ProblemResult] | None = None,
    env: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message = finished_message(
        evaluation_id=evaluation_id,
        outcome=outcome,
        reason=reason,
        results=results,
        environment=env,
    )
    send(FINISHED_TASK, message)
    return message


def main(argv: list[str] | None = None) -> None:
    """The `pkb-worker` console script: a worker on this host's profile queue."""
    logging.basicConfig(level=logging.INFO)
    settings = worker_settings()  # fail on bad settings before connecting anywhere
    profile = get_profile(settings.profile)
    check_sandbox(settings)  # warns loudly when bundle code would have network access
    app.conf.broker_url = settings.redis_url
    app.worker_main(
        [
            "worker",
            f"--queues={profile.queue}",
            "--concurrency=1",  # one evaluation at a time: it owns every GPU of the host
            f"--hostname=pkb-{profile.name}@%h",
            "--loglevel=INFO",
            *(argv or []),
        ]
    )
