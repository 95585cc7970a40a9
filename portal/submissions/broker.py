"""The portal's one door to the evaluator hosts: tests replace `send_evaluation`.

Besides the Celery messages, it reads and writes the liveness keys that evaluator hosts
share with the portal in the broker's database (evaluator/host/liveness.py, docs/recovery.md).
The database stays the truth: a broker that cannot be reached makes these calls log and
answer "cannot tell", never lose a submission.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import redis
from django.conf import settings

from evaluator.face import EVALUATE_TASK, EvaluationRequest, liveness
from portal.celery import app

logger = logging.getLogger(__name__)


@functools.cache
def _client(url: str) -> redis.Redis:
    return liveness.client(url)


def client() -> redis.Redis:
    return _client(settings.CELERY_BROKER_URL)


def send_evaluation(request: EvaluationRequest, *, queue: str) -> None:
    # The task id is the attempt's id: what a host or an operator sees names the attempt.
    app.send_task(
        EVALUATE_TASK, args=[request.to_json()], queue=queue, task_id=request.evaluation_id
    )
    # After the send: a marker without its message would make a lost request look queued.
    mark_sent(request.evaluation_id)


def mark_sent(evaluation_id: str) -> None:
    """Note beside the broker's data that it holds this attempt's request."""
    try:
        client().set(liveness.sent_key(evaluation_id), 1, ex=liveness.SENT_TTL_S)
    except liveness.ERRORS as exc:
        # Without the marker the sweeper sends it again; the host's claim stops a second run.
        logger.warning("sent %s but could not mark it: %s", evaluation_id, exc)


def _marked(evaluation_ids: list[str], key: Callable[[str], str]) -> set[str] | None:
    if not evaluation_ids:
        return set()
    try:
        pipe = client().pipeline(transaction=False)
        for eid in evaluation_ids:
            pipe.exists(key(eid))
        found = pipe.execute()
    except liveness.ERRORS as exc:
        logger.warning("cannot read the liveness keys in the broker: %s", exc)
        return None
    return {eid for eid, marked in zip(evaluation_ids, found, strict=True) if marked}


def messages_held(evaluation_ids: list[str]) -> set[str] | None:
    """The attempts whose request the broker still holds (queued, or taken by a host and
    not yet acknowledged), by their sent markers; None when the broker cannot say."""
    return _marked(evaluation_ids, liveness.sent_key)


def results_in_flight(evaluation_ids: list[str]) -> set[str] | None:
    """The attempts whose host handed its finished message to the broker (not recorded
    yet: a portal worker is on it, or died on it); None when the broker cannot say."""
    return _marked(evaluation_ids, liveness.reported_key)


def attempt_over(evaluation_id: str, *, reason: str) -> None:
    """Tell hosts that an attempt no longer counts: one running stops within seconds, and a
    copy of its request still queued is skipped. Best effort: the portal drops a stale
    attempt's messages whatever the host does."""
    try:
        pipe = client().pipeline()
        pipe.set(liveness.stop_key(evaluation_id), reason[:200], ex=liveness.STOP_TTL_S)
        pipe.delete(liveness.sent_key(evaluation_id), liveness.reported_key(evaluation_id))
        pipe.execute()
    except liveness.ERRORS as exc:
        logger.warning("cannot signal the end of attempt %s: %s", evaluation_id, exc)


def workers_last_seen(profiles: set[str]) -> dict[str, float | None] | None:
    """When a worker of each profile last announced itself (epoch seconds; None: never),
    or None when the broker cannot say."""
    try:
        return {p: liveness.last_worker_seen(client(), p) for p in sorted(profiles)}
    except liveness.ERRORS as exc:
        logger.warning("cannot ask the broker for workers: %s", exc)
        return None


def worker_missing(profile: str, *, now: float | None = None) -> bool:
    """True when no worker of `profile` announced itself within three heartbeats (False
    when the broker cannot say: a page must not claim what it does not know)."""
    seen = workers_last_seen({profile})
    if seen is None:
        return False
    last = seen[profile]
    now = time.time() if now is None else now
    return last is None or last < now - 3 * settings.PKB_HEARTBEAT_S


def workers_connected(
    profiles: set[str], *, now: float | None = None
) -> dict[str, list[str]] | None:
    """Per profile, the workers connected now (a heartbeat within three), by name; None when
    the broker cannot say."""
    now = time.time() if now is None else now
    since = now - 3 * settings.PKB_HEARTBEAT_S
    try:
        return {p: liveness.live_workers(client(), p, since=since) for p in sorted(profiles)}
    except liveness.ERRORS as exc:
        logger.warning("cannot ask the broker for workers: %s", exc)
        return None


def live_canaries(profiles: set[str], *, now: float | None = None) -> dict[str, dict] | None:
    """Per profile, each connected worker's (a heartbeat within three) last canary reading
    as stored, None where it has none; None when the broker cannot say."""
    now = time.time() if now is None else now
    since = now - 3 * settings.PKB_HEARTBEAT_S
    try:
        return {
            p: liveness.canary_readings(
                client(), p, liveness.live_workers(client(), p, since=since)
            )
            for p in sorted(profiles)
        }
    except liveness.ERRORS as exc:
        logger.warning("cannot ask the broker for canary readings: %s", exc)
        return None
