"""Memoised boards, valid until the data they are computed from changes.

A board of 1,000 teams takes a few hundred milliseconds to build (tens of thousands of best
results, scored in Python) and is read far more often than it changes. Database triggers
(migration 0001 of this app) bump a version whenever a row of the tables a board reads
changes: results, submissions (except their heartbeat and progress columns), problems and
teams. They sit in the database, so every writer is covered, `QuerySet.update()` and
`bulk_create` included, and the apps that record results need not know about this one.

- PostgreSQL: a sequence, `nextval` in the triggers. A sequence never blocks nor rolls
  back, so two writers never wait on each other for it and no version repeats. Its value
  moves when the writing statement runs, before its transaction commits: a board built in
  that window may miss the change and be kept under the new version. `MAX_AGE_S` bounds
  that case; any later change ends it sooner.
- SQLite: a one-row table that the triggers update (a counter and a random token, so a
  rolled-back change never leaves a version that names other data). SQLite has one writer
  at a time, so the update costs nothing in contention and commits with the change.
- Other databases: no version; boards are built on every request.

The memo lives in the process (no pickling: reading a pickled 1,000-row board would cost
what a page may take). Each web process keeps its own.

With `PKB_LEADERBOARD_SERVE_STALE` (on outside tests), a request that finds its board out
of date gets the previous one while a background thread builds the next, one thread per
board: during a competition results arrive every few seconds, and a rebuild at 1,000 teams
takes hundreds of milliseconds, far over the page's 50 ms goal. A change thus shows one
rebuild later (well under a second); only a process's first request waits for a build.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import connection, connections

T = TypeVar("T")

MAX_AGE_S = 30.0
MAX_ENTRIES = 256

SEQUENCE = "leaderboard_board_version"  # PostgreSQL
TABLE = "leaderboard_board_version"  # SQLite

_memo: dict[Hashable, tuple[Any, float, Any]] = {}
_lock = threading.Lock()
_rebuilding: dict[Hashable, threading.Thread] = {}
# Rebuilds asked for during the current request of this thread: started once its response
# is sent. Started at once, a rebuild takes the GIL from the request that is serving the
# previous board (measured: 2 ms pages became 50 ms pages).
_request = threading.local()


def data_version() -> Any:
    """A value that changes whenever a board's inputs change; None where unknown. One query."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SELECT last_value, is_called FROM {SEQUENCE}")
        elif connection.vendor == "sqlite":
            cursor.execute(f"SELECT counter, token FROM {TABLE} WHERE id = 1")
        else:
            return None
        row = cursor.fetchone()
    # The database's name is part of it: tests and tools may switch databases in a process.
    return (connection.settings_dict["NAME"], *row) if row else None


def memoised(key: Hashable, build: Callable[[], T]) -> T:
    """`build()`'s value, reused while the data version and its age allow.

    An outdated value is served as it is while a thread rebuilds it, where settings allow.
    """
    version = data_version()  # read before building: a board may be newer than its key, never older
    now = time.monotonic()
    hit = _memo.get(key)
    if version is not None and hit is not None:
        if hit[0] == version and now - hit[1] < MAX_AGE_S:
            return hit[2]
        if settings.PKB_LEADERBOARD_SERVE_STALE:
            _rebuild_in_background(key, build, version)
            return hit[2]
    value = build()
    _store(key, version, now, value)
    return value


def _store(key: Hashable, version: Any, built_at: float, value: Any) -> None:
    if version is None:
        return
    with _lock:
        if len(_memo) >= MAX_ENTRIES:
            _memo.clear()
        _memo[key] = (version, built_at, value)


def _rebuild_in_background(key: Hashable, build: Callable[[], Any], version: Any) -> None:
    """Start one thread rebuilding `key`, unless one already is."""
    with _lock:
        if key in _rebuilding:
            return
        thread = threading.Thread(
            target=_rebuild, args=(key, build, version), name="board-rebuild", daemon=True
        )
        _rebuilding[key] = thread
    pending = getattr(_request, "pending", None)
    if pending is None:
        thread.start()  # outside a request: nothing to wait for
    else:
        pending.append(thread)


def _request_started(**_: Any) -> None:
    _request.pending = []


def _request_finished(**_: Any) -> None:
    pending, _request.pending = getattr(_request, "pending", None) or [], None
    for thread in pending:
        thread.start()


request_started.connect(_request_started, dispatch_uid="leaderboard-freshness-started")
request_finished.connect(_request_finished, dispatch_uid="leaderboard-freshness-finished")


def _rebuild(key: Hashable, build: Callable[[], Any], version: Any) -> None:
    try:
        _store(key, version, time.monotonic(), build())
    finally:
        with _lock:
            _rebuilding.pop(key, None)
        # The thread opened its own connection; nothing else would ever close it.
        connections.close_all()


def wait_for_rebuilds() -> None:
    """Wait until the background rebuilds under way have finished (tests, benchmarks)."""
    with _lock:
        threads = [t for t in _rebuilding.values() if t.is_alive()]
    for thread in threads:
        thread.join()


def forget() -> None:
    """Drop every memoised value (tests, benchmarks)."""
    with _lock:
        _memo.clear()
