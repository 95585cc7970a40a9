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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.db import connection

T = TypeVar("T")

MAX_AGE_S = 30.0
MAX_ENTRIES = 256

SEQUENCE = "leaderboard_board_version"  # PostgreSQL
TABLE = "leaderboard_board_version"  # SQLite

_memo: dict[Hashable, tuple[Any, float, Any]] = {}
_lock = threading.Lock()


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
    """`build()`'s value, reused while the data version and its age allow."""
    version = data_version()  # read before building: a board may be newer than its key, never older
    now = time.monotonic()
    hit = _memo.get(key)
    if version is not None and hit is not None and hit[0] == version and now - hit[1] < MAX_AGE_S:
        return hit[2]
    value = build()
    if version is not None:
        with _lock:
            if len(_memo) >= MAX_ENTRIES:
                _memo.clear()
            _memo[key] = (version, now, value)
    return value


def forget() -> None:
    """Drop every memoised value (tests, benchmarks)."""
    with _lock:
        _memo.clear()
