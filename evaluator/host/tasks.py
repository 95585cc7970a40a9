"""The evaluator's Celery side: the only module of evaluator/ that touches the broker.

A GPU host runs one worker bound to its hardware profile's queue, one evaluation at a time.
It receives `evaluator.evaluate` with an EvaluationRequest and reports back by sending
tasks, by name only, to the portal's queue. The portal runs its own Celery app.

    pkb-worker                      (or: python -m evaluator worker)

The task body is thin: `run_evaluation` (evaluator/host/run.py) holds the logic and takes
its `send` function as an argument, so it runs in tests without a broker.

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
import signal
import socket
import threading
import time
from typing import Any

from celery import Celery, bootsteps
from celery.exceptions import Reject
from celery.worker import state as worker_state

from evaluator.contract import (
    EVALUATE_TASK,
    FAULT_SANDBOX,
    FINISHED_TASK,
    PORTAL_QUEUE,
    SANDBOX_FAULT,
)
from evaluator.host import canary, liveness
from evaluator.host.liveness import Attempt
from evaluator.host.profiles import get_profile
from evaluator.host.run import evaluation_id_of, run_evaluation
from evaluator.host.sandbox import SandboxError
from evaluator.host.settings import Settings, load_settings, redis_url
from evaluator.judge.confinement import check_sandbox
from evaluator.judge.stopping import EvaluationStopped, request_stop

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
SEND_RETRY_POLICY = {"max_retries": 5, "interval_start": 1, "interval_step": 2, "interval_max": 15}
# The finished message carries the whole evaluation: it waits out a broker restart of a
# few minutes (about 4) rather than have the evaluation run again.
FINISH_RETRY_POLICY = {**SEND_RETRY_POLICY, "max_retries": 20}

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
    if task_name == FINISHED_TASK and _group_stopping.is_set():
        # Its ranks may have been stopped half-way: the evaluation goes back to the queue
        # (evaluate, below) instead of a result that a stop made.
        raise EvaluationStopped(GROUP_STOP_REASON)
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
        evaluation_id_of(request_json),
        owner=f"{socket.gethostname()}:{os.getpid()}",
        lease_s=VISIBILITY_TIMEOUT_S,
    )
    # Here, for the task's length, not at worker_process_init: billiard installs its own
    # SIGTERM handler (an exit) in the pool process after Celery's initializer has run,
    # over whatever a worker_process_init receiver installed.
    previous = signal.signal(signal.SIGTERM, _stop_with_the_group)
    try:
        finished = run_evaluation(
            request_json,
            settings=worker_settings(),
            send=send_to_portal,
            attempt=attempt,
            heartbeat_s=HEARTBEAT_S,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    if finished is not None and finished.get("fault") == FAULT_SANDBOX:
        canary.mark_fault(worker_settings().scratch_dir)
    if finished is None and _group_stopping.is_set():
        # Not acknowledged: the broker puts it back at the head of this profile's queue,
        # in this site's database, for the next worker.
        raise Reject(GROUP_STOP_REASON, requeue=True)


# SIGTERM to the pool process comes only with one to the worker's whole process group:
# honcho's Ctrl-C (`make run`), or a teardown's killpg; systemd (KillMode=mixed) and
# `docker stop` signal the main process alone, whose warm shutdown lets the evaluation
# finish. Stopping the whole group means stopping now (honcho kills the group 5 s later):
# the pool process stops its evaluation, as the portal's stop signal would, and the task
# hands its message back, where the default action would kill the pool process and make
# the main one log a WorkerLostError.
GROUP_STOP_REASON = "the worker's process group was told to stop (SIGTERM)"
_group_stopping = threading.Event()


def _stop_with_the_group(signum: int, frame: Any) -> None:
    _group_stopping.set()
    # From a thread: request_stop takes a lock that the interrupted code may hold.
    threading.Thread(target=request_stop, args=(GROUP_STOP_REASON,), daemon=True).start()


class _GroupStopWithoutTraceback(logging.Filter):
    """Celery logs every Reject with its traceback; this one is the expected way a stop
    hands its message back, and its warning line says so in full."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, Reject) and exc.reason == GROUP_STOP_REASON:
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("celery.app.trace").addFilter(_GroupStopWithoutTraceback())


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


def main(argv: list[str] | None = None) -> None:
    """The `pkb-worker` console script: a worker on this host's profile queue."""
    logging.basicConfig(level=logging.INFO)
    settings = worker_settings()  # fail on bad settings before connecting anywhere
    profile = get_profile(settings.profile)
    plan = canary.canary_plan(os.environ, profile.backend)  # its settings too
    try:
        check_sandbox(settings)  # warns loudly when bundle code would have network access
    except SandboxError as exc:
        if SANDBOX_FAULT not in str(exc) or not plan.interval_s:
            raise
        # Fails closed, and visibly: the canary's first reading meets the same fault and
        # holds all work, saying why on /queue/ and /health/, until the sandbox starts.
        log.error("%s; the canary holds all work until it starts", exc)
    app.conf.broker_url = settings.redis_url
    app.worker_main(
        [
            "worker",
            f"--queues={profile.queue},{profile.unranked_queue}",
            "--concurrency=1",  # one evaluation at a time: it owns every GPU of the host
            f"--hostname=pkb-{settings.worker_name}@%h",
            "--loglevel=INFO",
            *(argv or []),
        ]
    )
