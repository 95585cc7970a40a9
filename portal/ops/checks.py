"""What the load balancer's health check and /metrics ask of the database and the broker."""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import connection

from evaluator.face import PORTAL_QUEUE, PROFILES, liveness

logger = logging.getLogger(__name__)

# A health check must answer well within the load balancer's own timeout (often 5 s).
BROKER_TIMEOUT_S = 2.0
# Kombu's Redis transport keeps a queue's messages in a list named after the queue, and
# those sent with a priority in lists with this separator and the priority step appended.
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


def _broker() -> redis.Redis:
    return redis.Redis.from_url(
        str(settings.CELERY_BROKER_URL),
        socket_connect_timeout=BROKER_TIMEOUT_S,
        socket_timeout=BROKER_TIMEOUT_S,
    )


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        # The reason goes to the log, not to whoever asks: it may name hosts and users.
        logger.exception("health: database unreachable")
        return False


def broker_ok() -> bool:
    try:
        return bool(_broker().ping())
    except redis.RedisError:
        logger.exception("health: broker unreachable")
        return False


def health() -> dict[str, bool]:
    return {"database": database_ok(), "broker": broker_ok()}


def broker_queue_lengths() -> dict[str, int]:
    """Messages waiting in the broker per queue (the portal's, and each profile's ranked and
    unranked ones).

    Raises redis.RedisError when the broker cannot be reached.
    """
    queues = [PORTAL_QUEUE] + [
        queue for p in PROFILES.values() for queue in (p.queue, p.unranked_queue)
    ]
    client = _broker()
    with client.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.llen(queue)
            for step in _PRIORITY_STEPS:
                pipe.llen(f"{queue}{_PRIORITY_SEPARATOR}{step}")
        lengths = pipe.execute()
    per_queue = 1 + len(_PRIORITY_STEPS)
    return {q: sum(lengths[i * per_queue : (i + 1) * per_queue]) for i, q in enumerate(queues)}


def worker_heartbeats() -> dict[tuple[str, str], float]:
    """(profile, worker) -> when each evaluator worker last announced itself (epoch
    seconds), idle or busy: the evaluator's heartbeat keys (evaluator/host/liveness.py).

    Raises redis.RedisError when the broker cannot be reached.
    """
    client = _broker()
    with client.pipeline(transaction=False) as pipe:
        for profile in PROFILES:
            pipe.zrange(liveness.workers_key(profile), 0, -1, withscores=True)
        replies = pipe.execute()
    return {
        (profile, name.decode()): score
        for profile, members in zip(PROFILES, replies, strict=True)
        for name, score in members
    }
