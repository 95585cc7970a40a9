"""One evaluation on this host, without the broker: the request read, the bundle judged
(`evaluator.judge.evaluate`), and started, progress and finished messages sent through a
`send` function given by the caller (`evaluator.host.tasks` passes one that goes to the
portal's queue; tests pass a recorder). Beside the evaluation a thread watches the
portal's stop signal and resends the last progress as a heartbeat (`_Watch`)."""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.exceptions
from kombu.exceptions import OperationalError

from evaluator.contract import (
    FAULT_SANDBOX,
    FINISHED_TASK,
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
from evaluator.host import liveness
from evaluator.host.liveness import Attempt
from evaluator.host.profiles import HardwareProfile, get_profile
from evaluator.host.settings import Settings
from evaluator.intake.bundle import BundleError, read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.pool import SandboxFault
from evaluator.judge.profiling import ProfileCaseError, within_budget
from evaluator.judge.stopping import EvaluationStopped, clear_stop, raise_if_stopped, request_stop
from problems.registry import all_problems
from problems.spec import Problem

log = logging.getLogger(__name__)

# The stop signal is a GET on the broker: cheap enough to ask every second.
STOP_POLL_S = 1.0
# Errors of the broker connection, worth a retry; a bundle's failure never is.
INFRASTRUCTURE_ERRORS = (OperationalError, redis.exceptions.ConnectionError, ConnectionError)

Send = Callable[[str, dict[str, Any]], None]


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
    evaluation_id = evaluation_id_of(request_json)
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
    except SandboxFault as exc:  # this host's alone: the portal sends it to another
        log.error("evaluation %s: %s", evaluation_id, exc)
        return _fail(send, evaluation_id, f"the evaluator failed: {exc}", fault=FAULT_SANDBOX)
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


def evaluation_id_of(request_json: Any) -> str:
    value = request_json.get("evaluation_id") if isinstance(request_json, dict) else None
    return value if isinstance(value, str) else ""


def _fail(send: Send, evaluation_id: str, reason: str, *, fault: str = "") -> dict[str, Any]:
    log.warning("evaluation %s failed: %s", evaluation_id or "(no id)", reason)
    return _finish(send, evaluation_id, EvaluationOutcome.FAILED, reason=reason, fault=fault)


def _finish(
    send: Send,
    evaluation_id: str,
    outcome: EvaluationOutcome,
    *,
    reason: str = "",
    results: list[ProblemResult] | None = None,
    env: dict[str, Any] | None = None,
    artifacts: list[Artifact] | None = None,
    fault: str = "",
) -> dict[str, Any]:
    message = finished_message(
        evaluation_id=evaluation_id,
        outcome=outcome,
        reason=reason,
        results=results,
        environment=env,
        artifacts=artifacts,
        fault=fault,
    )
    send(FINISHED_TASK, message)
    return message
