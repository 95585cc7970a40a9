"""The evaluator's Celery side: the only module of evaluator/ that touches the broker.

A GPU host runs one worker bound to its hardware profile's queue, one evaluation at a time.
It receives `evaluator.evaluate` with an EvaluationRequest and reports back by sending
tasks, by name only, to the portal's queue. The portal runs its own Celery app.

    pkb-worker                      (or: python -m evaluator worker)

The task body is thin: `run_evaluation` holds the logic and takes its `send` function as
an argument, so it runs in tests without a broker.

Liveness (docs/recovery.md): while it evaluates, the host sends a heartbeat to the portal
every PKB_HEARTBEAT_S and checks the portal's stop signal every second; its main process
keeps the running message's visibility deadline fresh, so the broker hands the message to
another worker within PKB_VISIBILITY_TIMEOUT_S of this one being killed, and not before.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing.process as mp_process
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.exceptions
from celery import Celery, bootsteps
from celery.worker import state as worker_state
from kombu.exceptions import OperationalError

from evaluator.contract import (
    EVALUATE_TASK,
    FINISHED_TASK,
    PORTAL_QUEUE,
    PROGRESS_TASK,
    STARTED_TASK,
    Artifact,
    ContractError,
    EvaluationOutcome,
    EvaluationRequest,
    Mode,
    Phase,
    ProblemResult,
    finished_message,
    progress_message,
    started_message,
)
from evaluator.host import canary, liveness
from evaluator.host.liveness import Attempt
from evaluator.host.profiles import HardwareProfile, get_profile
from evaluator.host.settings import Settings, load_settings, redis_url
from evaluator.intake.bundle import BundleError, read_bundle
from evaluator.judge.evaluate import check_sandbox, evaluate_bundle
from evaluator.judge.pool import EvaluationStopped, clear_stop, raise_if_stopped, request_stop
from evaluator.judge.profiling import ProfileCaseError, within_budget
from problems.registry import all_problems
from problems.spec import Problem

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT_S = 3300
HARD_TIME_LIMIT_S = 3600
assert HARD_TIME_LIMIT_S > SOFT_TIME_LIMIT_S
# Redis hands an unacknowledged task to another worker after the visibility timeout. The
# running task is acknowledged when it ends (acks_late), but its deadline is pushed back
# on every heartbeat (KeepMessagesVisible), so the timeout is a few heartbeats long, not
# the longest evaluation: a killed worker's task comes back within it.
HEARTBEAT_S = liveness.heartbeat_s()
VISIBILITY_TIMEOUT_S = liveness.visibility_timeout_s()
# The stop signal is a GET on the broker: cheap enough to ask every second.
STOP_POLL_S = 1.0

# Errors of the broker connection, worth a retry; a bundle's failure never is.
INFRASTRUCTURE_ERRORS = (OperationalError, redis.exceptions.ConnectionError, ConnectionError)
SEND_RETRY_POLICY = {"max_retries": 5, "interval_start": 1, "interval_step": 2, "interval_max": 15}
# The finished message carries the whole evaluation: it waits out a broker restart of a
# few minutes (about 4) rather than have the evaluation run again.
FINISH_RETRY_POLICY = {**SEND_RETRY_POLICY, "max_retries": 20}

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
    # Every consumer restores what has been unacknowledged for longer than its own timeout,
    # from the whole database: the portal's settings use the same numbers.
    broker_transport_options={
        "visibility_timeout": VISIBILITY_TIMEOUT_S,
        "unacked_restore_interval": 5,
        "unacked_restore_throttle": 1,
    },
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
        retry_policy=FINISH_RETRY_POLICY if task_name == FINISHED_TASK else SEND_RETRY_POLICY,
    )


@functools.cache
def broker() -> Any:
    """This process's own Redis client for the liveness keys (redis.Redis)."""
    return liveness.client(worker_settings().redis_url)


# No autoretry: a retried task would wait in a worker for its countdown past the visibility
# timeout. A broker error that outlasts the sends' own retries ends the task; its heartbeats
# stop and the portal queues the submission again.
@app.task(name=EVALUATE_TASK)
def evaluate(request_json: dict[str, Any]) -> None:
    _allow_child_processes()
    attempt = Attempt(
        broker(),
        _evaluation_id_of(request_json),
        owner=f"{socket.gethostname()}:{os.getpid()}",
        lease_s=VISIBILITY_TIMEOUT_S,
    )
    run_evaluation(
        request_json,
        settings=worker_settings(),
        send=send_to_portal,
        attempt=attempt,
        heartbeat_s=HEARTBEAT_S,
    )


class KeepMessagesVisible(bootsteps.StartStopStep):
    """In the worker's main process, every heartbeat: push back the visibility deadline of
    the messages it runs, and say that it serves its profile.

    kombu's Redis transport hands out again any message whose delivery time in the
    `unacked_index` sorted set is older than the visibility timeout; renewing that time
    (only for members still there: XX) is what lets the timeout be short. A killed worker
    renews nothing, and its message is restored within the timeout.
    """

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.tref: Any = None

    def start(self, worker: Any) -> None:
        self.beat(worker)
        self.tref = worker.timer.call_repeatedly(HEARTBEAT_S, self.beat, (worker,), priority=10)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()

    def beat(self, worker: Any) -> None:
        now = time.time()
        # Reserved ones too: after a reconnect the worker may hold one behind its running
        # evaluation, and another worker must not take it meanwhile.
        requests = [*worker_state.active_requests, *worker_state.reserved_requests]
        tags = [r.message.delivery_tag for r in requests]
        index = app.conf.broker_transport_options.get("unacked_index_key", "unacked_index")
        try:
            if tags:
                broker().zadd(index, dict.fromkeys(tags, now), xx=True)
            liveness.announce_worker(
                broker(), profile=worker_settings().profile, name=worker.hostname, now=now
            )
        except liveness.ERRORS as exc:
            log.warning("heartbeat of the worker's messages failed: %s", exc)


app.steps["worker"].add(KeepMessagesVisible)
# Same code judged against itself at start and at an interval; out of bounds, no work.
app.steps["consumer"].add(canary.consumer_step(worker_settings, broker))


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
    attempt: Attempt | None = None,
    heartbeat_s: float | None = None,
) -> dict[str, Any] | None:
    """Evaluate one request, reporting started/progress/finished through `send`.

    Returns the finished message, or None when the attempt was called off (before it
    started, between problems, or while its ranks ran) or already runs elsewhere: the
    portal would drop its results. `attempt` is the broker's view of it (stop signal and
    claim); with `heartbeat_s` the last progress is sent again that often, as a heartbeat.
    Only `send`'s own errors (the broker) escape.
    """
    evaluation_id = _evaluation_id_of(request_json)
    try:
        request = EvaluationRequest.from_json(request_json)
    except ContractError as exc:
        return _fail(send, evaluation_id, f"bad evaluation request: {exc}")
    clear_stop()
    why_not = attempt.claim() if attempt is not None else ""
    if why_not:
        log.info("evaluation %s skipped: %s", evaluation_id, why_not)
        return None
    watch = _Watch(
        evaluation_id, request.problems, send=send, attempt=attempt, heartbeat_s=heartbeat_s
    )
    try:
        finished = _run(request, evaluation_id, settings, send, profile, problems, watch)
        if attempt is not None:
            attempt.mark_reported()
        return finished
    except EvaluationStopped as exc:
        log.warning("evaluation %s stopped: %s", evaluation_id, exc)
        return None
    finally:
        watch.finish()
        clear_stop()  # after the watch ended: a stop for this attempt ends with it
        if attempt is not None:
            attempt.release()


class _Watch:
    """What runs beside one evaluation: a thread that checks the portal's stop signal every
    second (and kills the ranks when it comes) and resends the last progress as a heartbeat,
    renewing the claim, every `heartbeat_s`."""

    def __init__(
        self,
        evaluation_id: str,
        slugs: list[str],
        *,
        send: Send,
        attempt: Attempt | None,
        heartbeat_s: float | None,
    ) -> None:
        self.evaluation_id, self.send, self.attempt = evaluation_id, send, attempt
        self.heartbeat_s = heartbeat_s
        self.progress = progress_message(
            evaluation_id=evaluation_id, done=0, total=len(slugs), current=""
        )
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def begin(self) -> None:
        if self.attempt is None and self.heartbeat_s is None:
            return
        self.thread = threading.Thread(target=self._loop, name="pkb-watch", daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(liveness.SOCKET_TIMEOUT_S * 2)

    def check(self) -> None:
        """Between problems: raise EvaluationStopped if the attempt was called off."""
        reason = self.attempt.stop_reason() if self.attempt is not None else ""
        if reason:
            request_stop(reason)
        raise_if_stopped()

    def report(
        self,
        done: int,
        total: int,
        current: str,
        *,
        phase: Phase = Phase.JUDGING,
        result: ProblemResult | None = None,
    ) -> None:
        """Send progress now; `result` (the problem just judged) goes with this message
        only, the heartbeats resend the rest."""
        message = functools.partial(
            progress_message,
            evaluation_id=self.evaluation_id,
            done=done,
            total=total,
            current=current,
            phase=phase,
        )
        self.progress = message()
        self._send_progress(message(result=result) if result is not None else None)

    def _send_progress(self, message: dict[str, Any] | None = None) -> None:
        try:
            self.send(PROGRESS_TASK, message or self.progress)
        except INFRASTRUCTURE_ERRORS:
            # Progress is a courtesy: losing one must not cost the evaluation.
            log.warning("progress message for %s lost", self.evaluation_id, exc_info=True)

    def _loop(self) -> None:
        next_beat = time.monotonic() + (self.heartbeat_s or 0)
        while not self.done.wait(STOP_POLL_S):
            reason = self.attempt.stop_reason() if self.attempt is not None else ""
            if reason:
                log.warning("evaluation %s called off: %s", self.evaluation_id, reason)
                request_stop(reason)
                return
            if self.heartbeat_s is not None and time.monotonic() >= next_beat:
                next_beat = time.monotonic() + self.heartbeat_s
                self._send_progress()
                if self.attempt is not None:
                    self.attempt.renew()


def _run(
    request: EvaluationRequest,
    evaluation_id: str,
    settings: Settings,
    send: Send,
    profile: HardwareProfile | None,
    problems: Mapping[str, Problem] | None,
    watch: _Watch,
) -> dict[str, Any]:
    send(STARTED_TASK, started_message(evaluation_id=evaluation_id, host=socket.gethostname()))
    watch.begin()
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

    judged: list[ProblemResult] = []

    def progress(done: int, total: int, current: str) -> None:
        watch.check()  # between problems: a called-off attempt goes no further
        # Called before each problem and once after the last: the one judged before it,
        # if any, goes along, so its row fills in while the others are judged.
        just_judged = judged[done - 1] if 0 < done <= len(judged) else None
        watch.report(done, total, current, result=just_judged)

    artifacts: list[Artifact] = []  # a profile run's traces and summaries
    # The compile pass comes first and takes a while (CUDA extensions build on every core).
    watch.report(0, len(request.problems), "", phase=Phase.COMPILING)
    try:
        results, environment = evaluate_bundle(
            bundle,
            slugs=request.problems,
            profile=profile,
            settings=settings,
            evaluation_id=evaluation_id,
            on_progress=progress,
            problems=catalog,
            on_result=judged.append,
            mode=Mode(request.mode),
            profile_case=request.profile_case,
            on_artifact=artifacts.append,
        )
    except EvaluationStopped:
        raise
    except ProfileCaseError as exc:  # refused before anything ran
        return _fail(send, evaluation_id, str(exc))
    except Exception as exc:  # a broken host, or Celery's soft time limit
        log.exception("evaluation %s failed", evaluation_id)
        return _fail(send, evaluation_id, f"the evaluator failed: {type(exc).__name__}: {exc}")
    return _finish(
        send,
        evaluation_id,
        EvaluationOutcome.DONE,
        results=results,
        env=environment,
        artifacts=within_budget(artifacts),
    )


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
    artifacts: list[Artifact] | None = None,
) -> dict[str, Any]:
    message = finished_message(
        evaluation_id=evaluation_id,
        outcome=outcome,
        reason=reason,
        results=results,
        environment=env,
        artifacts=artifacts,
    )
    send(FINISHED_TASK, message)
    return message


def main(argv: list[str] | None = None) -> None:
    """The `pkb-worker` console script: a worker on this host's profile queue."""
    logging.basicConfig(level=logging.INFO)
    settings = worker_settings()  # fail on bad settings before connecting anywhere
    profile = get_profile(settings.profile)
    canary.canary_plan(os.environ, profile.backend)  # its settings too
    check_sandbox(settings)  # warns loudly when bundle code would have network access
    app.conf.broker_url = settings.redis_url
    app.worker_main(
        [
            "worker",
            f"--queues={profile.queue}",
            "--concurrency=1",  # one evaluation at a time: it owns every GPU of the host
            f"--hostname=pkb-{settings.worker_name}@%h",
            "--loglevel=INFO",
            *(argv or []),
        ]
    )
