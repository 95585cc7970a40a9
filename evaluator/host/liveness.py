"""The small Redis keys beside Celery's messages that keep evaluations alive and honest.

Portal and evaluator hosts share the broker's Redis database and nothing else, so the
signals that must reach a host between messages live there (docs/recovery.md):

- `pkb:sent:<evaluation_id>`: the portal wrote it after handing the request to the broker.
  It lives and dies with the broker's data, so its absence says the message is gone (a
  restart without persistence, a send that failed) and the request must be sent again.
- `pkb:stop:<evaluation_id>`: the attempt no longer counts (cancelled, superseded by a
  requeue, finished). A host checks it before it starts and every second while it runs.
- `pkb:claim:<evaluation_id>`: the host running the attempt, renewed on every heartbeat;
  a second copy of the same message (a re-send, a redelivery) finds it and steps aside.
- `pkb:reported:<evaluation_id>`: the host handed the finished message to the broker. A
  portal worker killed while recording it leaves it unacknowledged, to be handed out again
  after the visibility timeout; meanwhile the sweeper must not take the silence of a host
  that is done for a stall and judge the bundle again.
- `pkb:workers:<profile>`: the workers serving a hardware profile, scored by when they last
  said so (every heartbeat).
- `pkb:canary:<profile>:<worker>`: the worker's last same-code reading (JSON, written by
  evaluator/host/canary.py): while it reads out of bounds the worker takes no work, and
  the portal says so on the queue and submission pages.

Imports nothing but redis: the portal reads the same names.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import redis

from evaluator.host.settings import env_int

log = logging.getLogger(__name__)

# Defaults shared by both sides; the portal's settings read the same variables.
DEFAULT_HEARTBEAT_S = 10
DEFAULT_VISIBILITY_TIMEOUT_S = 60
# A stop signal outlives any redelivery of its message; a sent marker any wait in a queue;
# a reported marker any portal outage (after it the sweeper may judge the bundle again).
STOP_TTL_S = 7 * 24 * 3600
SENT_TTL_S = 30 * 24 * 3600
REPORTED_TTL_S = 24 * 3600
# Broker calls from the liveness paths must never hang an evaluation or a page.
SOCKET_TIMEOUT_S = 3.0

ERRORS = (redis.exceptions.RedisError, OSError)


class LivenessError(ValueError):
    """A liveness setting the evaluator cannot use."""


def sent_key(evaluation_id: str) -> str:
    return f"pkb:sent:{evaluation_id}"


def stop_key(evaluation_id: str) -> str:
    return f"pkb:stop:{evaluation_id}"


def claim_key(evaluation_id: str) -> str:
    return f"pkb:claim:{evaluation_id}"


def reported_key(evaluation_id: str) -> str:
    return f"pkb:reported:{evaluation_id}"


def workers_key(profile: str) -> str:
    return f"pkb:workers:{profile}"


def canary_key(profile: str, worker: str) -> str:
    return f"pkb:canary:{profile}:{worker}"


def heartbeat_s(env: Mapping[str, str] = os.environ) -> int:
    return env_int(env, "PKB_HEARTBEAT_S", DEFAULT_HEARTBEAT_S, minimum=1)


def visibility_timeout_s(env: Mapping[str, str] = os.environ) -> int:
    """How long Redis keeps an unacknowledged message from other workers: a few heartbeats,
    since a running evaluation renews its message's deadline on every one."""
    value = env_int(env, "PKB_VISIBILITY_TIMEOUT_S", DEFAULT_VISIBILITY_TIMEOUT_S, minimum=1)
    if value < 3 * heartbeat_s(env):
        raise LivenessError("PKB_VISIBILITY_TIMEOUT_S must be at least 3 x PKB_HEARTBEAT_S")
    return value


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
    )


class Attempt:
    """One evaluation attempt as the host running it sees it in the broker."""

    def __init__(self, broker: redis.Redis, evaluation_id: str, *, owner: str, lease_s: int):
        self.broker = broker
        self.evaluation_id = evaluation_id
        self.owner = owner
        self.lease_s = lease_s

    def stop_reason(self) -> str:
        """Why the portal called this attempt off, or "" (also when Redis cannot say: the
        portal drops a stale attempt's results anyway, so running on is safe)."""
        try:
            reason = self.broker.get(stop_key(self.evaluation_id))
        except ERRORS as exc:
            log.warning("cannot read the stop signal of %s: %s", self.evaluation_id, exc)
            return ""
        return _text(reason)

    def claim(self) -> str:
        """Take the attempt; "" when it is ours, else why another copy must not run."""
        reason = self.stop_reason()
        if reason:
            return reason
        key = claim_key(self.evaluation_id)
        try:
            if self.broker.set(key, self.owner, nx=True, ex=self.lease_s):
                return ""
            holder = self.broker.get(key)
        except ERRORS as exc:
            log.warning("cannot claim %s: %s", self.evaluation_id, exc)
            return ""
        if holder is None or _text(holder) == self.owner:
            return ""
        return f"already running on {_text(holder)}"

    def renew(self) -> None:
        try:
            self.broker.set(claim_key(self.evaluation_id), self.owner, ex=self.lease_s)
        except ERRORS as exc:
            log.warning("cannot renew the claim on %s: %s", self.evaluation_id, exc)

    def mark_reported(self) -> None:
        try:
            self.broker.set(reported_key(self.evaluation_id), 1, ex=REPORTED_TTL_S)
        except ERRORS as exc:
            log.warning("cannot mark %s reported: %s", self.evaluation_id, exc)

    def release(self) -> None:
        key = claim_key(self.evaluation_id)
        try:
            if self.broker.get(key) == self.owner.encode():
                self.broker.delete(key)
        except ERRORS as exc:
            log.warning("cannot release the claim on %s: %s", self.evaluation_id, exc)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def announce_worker(
    broker: redis.Redis, *, profile: str, name: str, now: float | None = None
) -> None:
    """Say that worker `name` serves `profile`; forget workers silent for a day."""
    now = time.time() if now is None else now
    key = workers_key(profile)
    pipe = broker.pipeline()
    pipe.zadd(key, {name: now})
    pipe.zremrangebyscore(key, 0, now - 86400)
    pipe.execute()


def last_worker_seen(broker: redis.Redis, profile: str) -> float | None:
    """When a worker of `profile` last said it serves it (epoch seconds), or None."""
    newest = broker.zrevrange(workers_key(profile), 0, 0, withscores=True)
    return float(newest[0][1]) if newest else None


def live_workers(broker: redis.Redis, profile: str, *, since: float) -> list[str]:
    """The workers of `profile` that announced themselves at `since` or later, by name."""
    names = broker.zrangebyscore(workers_key(profile), since, "+inf")
    return sorted(_text(name) for name in names)


def canary_readings(broker: redis.Redis, profile: str, workers: list[str]) -> dict[str, Any]:
    """Each worker's last canary reading as stored (parsed JSON; None where there is none
    or it is not JSON): the reader checks its shape."""
    if not workers:
        return {}
    raw = broker.mget([canary_key(profile, name) for name in workers])
    return {name: _json_or_none(value) for name, value in zip(workers, raw, strict=True)}


def _json_or_none(value: Any) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
