"""Memoised boards, rebuilt as soon as the data they are computed from changes.

A board of 1,000 teams takes tens to hundreds of milliseconds to build from its kept rows
(`kept.py`; `python -m portal.leaderboard.bench`), over a page's 50 ms goal, and is read far
more often than it changes. Yet a recorded result must show on the next view of
every board it touches. So boards are rebuilt when their data change, not when someone next
looks, and a request is never served a board older than the data it has seen committed.

Database triggers (migrations of this app) bump a version whenever a row of the tables a
board reads changes: results, submissions (except their live columns: heartbeat, progress),
problems and teams. They sit in the database, so every writer is covered, `QuerySet.update()`
and `bulk_create` included, and the apps that record results need not know about this one.

- PostgreSQL: a sequence, `nextval` in the triggers, which also NOTIFY (`CHANNEL`). A
  sequence never blocks nor rolls back, so two writers never wait on each other for it; but
  it moves when the writing statement runs, before its transaction commits, so a board built
  in that window misses the change under the new version. The notification is delivered when
  the transaction commits: its arrival marks every memoised board out of date (a new
  generation), which closes the window.
- SQLite: a one-row table that the triggers update (a counter and a random token, so a
  rolled-back change never leaves a version that names other data). It commits with the
  change; the watcher reads it every `POLL_S`.
- Other databases: no version; boards are built on every request.

With `PKB_LEADERBOARD_REBUILD_ON_CHANGE` (on outside tests) each process runs one watcher
thread that learns of every change (LISTEN, or the polled version) and rebuilds at once the
boards the process served within `RECENT_S`, most recently viewed first. A request whose
board is out of date waits for the build of it under way, or builds it itself when none is
(a process's first look at a board, one nobody looked at lately): one build per board per
change, never a stale board. The memo lives in the process (no pickling: reading a pickled
1,000-row board would cost what a page may take); each web process keeps its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, connections

from portal.leaderboard.triggers import CHANNEL, SEQUENCE, TABLE

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_AGE_S = 30.0  # bounds a board built from data the version cannot see (watcher off)
MAX_ENTRIES = 256
# SQLite: how often the watcher reads the version (a one-row read; at 0.5 s the wait for it
# was most of the time until a recorded result showed, 2026-11-28).
POLL_S = 0.1
LISTEN_TIMEOUT_S = 1.0  # PostgreSQL: how often the watcher looks up from LISTEN (to stop)
RECENT_S = 900.0  # boards viewed within this long are rebuilt on a change
WAIT_S = 30.0  # the longest a request waits for another thread's build of its board


@dataclass
class _Entry:
    version: Any
    generation: int  # the generation when its build began
    built_at: float
    value: Any
    build: Callable[[], Any]
    used_at: float


@dataclass
class _Flight:
    """One build under way: requests for the same board and version wait for it."""

    version: Any
    generation: int
    done: threading.Event


_memo: dict[Hashable, _Entry] = {}
_flights: dict[Hashable, _Flight] = {}
_lock = threading.Lock()
# Moves on every committed change the watcher hears of: a board of an older generation may
# lack it even where its version matches (PostgreSQL's sequence moves before the commit).
_generation = 0
_watcher: _Watcher | None = None


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
    """`build()`'s value, reused while the data version, the generation and its age allow;
    otherwise built, or awaited where another thread is building it."""
    if settings.PKB_LEADERBOARD_REBUILD_ON_CHANGE:
        _ensure_watcher()
    version = data_version()  # read before building: a board may be newer than its key, never older
    if version is None:
        return build()
    hit = _fresh(key, version, touch=True)
    if hit is not None:
        return hit.value
    return _build(key, build, version)


def _fresh(key: Hashable, version: Any, *, touch: bool = False) -> _Entry | None:
    now = time.monotonic()
    with _lock:
        hit = _memo.get(key)
        if hit is None or hit.version != version or hit.generation != _generation:
            return None
        if now - hit.built_at >= MAX_AGE_S:
            return None
        if touch:
            hit.used_at = now
        return hit


def _build(key: Hashable, build: Callable[[], T], version: Any) -> T:
    """Build `key`'s value at `version`, unless a build of it at that version and generation
    is under way: then wait for that one (a change costs one build per board, not one per
    request that finds it out of date)."""
    with _lock:
        flight = _flights.get(key)
        joining = (
            flight is not None and flight.version == version and flight.generation == _generation
        )
        if not joining:
            flight = _Flight(version, _generation, threading.Event())
            _flights[key] = flight
    assert flight is not None
    if joining:
        flight.done.wait(WAIT_S)
        hit = _fresh(key, version, touch=True)
        if hit is not None:
            return hit.value
        flight = _Flight(version, _generation, threading.Event())  # it failed or is late
    try:
        value = build()
        _store(key, flight, value, build)
        return value
    finally:
        with _lock:
            if _flights.get(key) is flight:
                del _flights[key]
        flight.done.set()


def _store(key: Hashable, flight: _Flight, value: Any, build: Callable[[], Any]) -> None:
    now = time.monotonic()
    with _lock:
        if len(_memo) >= MAX_ENTRIES:
            _memo.clear()
        used_at = _memo[key].used_at if key in _memo else now
        _memo[key] = _Entry(flight.version, flight.generation, now, value, build, used_at)
        outdated = flight.generation != _generation
    if outdated and _watcher is not None:
        _watcher.dirty.set()  # a change came while it was built: its turn in the next pass


def _heard() -> None:
    """A change was committed: every board is out of date from now on."""
    global _generation
    with _lock:
        _generation += 1


def _rebuild_recent() -> None:
    """Rebuild the boards viewed within RECENT_S, the most recently viewed first."""
    now = time.monotonic()
    with _lock:
        recent = sorted(
            ((e.used_at, key, e.build) for key, e in _memo.items() if now - e.used_at < RECENT_S),
            key=lambda item: -item[0],
        )
    for _, key, build in recent:
        version = data_version()
        if version is None or _fresh(key, version) is not None:
            continue  # a request built it meanwhile
        try:
            _build(key, build, version)
        except Exception:
            # The board's next request builds it (and shows the error, if it persists).
            log.exception("rebuilding board %r failed", key)


class _Watcher:
    """Two threads: one hears of changes and marks the boards out of date at once (it never
    builds, so a commit is known within the notification's delivery, not after a build under
    way), the other rebuilds the recently viewed boards after each change it is told of."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.stop = threading.Event()
        self.dirty = threading.Event()
        self.threads = [
            threading.Thread(target=self._hear, name="board-listener", daemon=True),
            threading.Thread(target=self._rebuild, name="board-rebuilder", daemon=True),
        ]

    def alive(self) -> bool:
        return self.pid == os.getpid() and all(t.is_alive() for t in self.threads)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        self.stop.set()
        self.dirty.set()
        for thread in self.threads:
            if thread.ident is not None:
                thread.join()

    def changed(self) -> None:
        _heard()
        self.dirty.set()

    def _rebuild(self) -> None:
        try:
            while True:
                self.dirty.wait()
                if self.stop.is_set():
                    return
                self.dirty.clear()
                if not settings.PKB_LEADERBOARD_REBUILD_ON_CHANGE:
                    continue  # turned off since it started (tests switch it per test)
                try:
                    _rebuild_recent()
                except Exception:
                    log.exception("board rebuilder: failed; waiting for the next change")
        finally:
            connections.close_all()  # the thread's own; nothing else would close them

    def _hear(self) -> None:
        while not self.stop.is_set():
            try:
                if connection.vendor == "postgresql":
                    self._listen()
                else:
                    self._poll()
            except Exception:
                log.exception("board listener: lost its connection; starting again")
                self.stop.wait(POLL_S)
            finally:
                connections.close_all()

    def _listen(self) -> None:
        conn = connection.get_new_connection(connection.get_connection_params())
        try:
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            self.changed()  # what was committed before LISTEN took effect went unheard
            while not self.stop.is_set():
                for _ in conn.notifies(timeout=LISTEN_TIMEOUT_S, stop_after=1):
                    self.changed()
        finally:
            conn.close()

    def _poll(self) -> None:
        seen = data_version()
        while not self.stop.wait(POLL_S):
            version = data_version()
            if version != seen:
                seen = version
                self.changed()


def _ensure_watcher() -> None:
    """Start this process's watcher, once (after a fork too: threads do not survive one)."""
    global _watcher
    if _watcher is not None and _watcher.alive():
        return
    with _lock:
        if _watcher is not None and _watcher.alive():
            return
        _watcher = _Watcher()
    _watcher.start()


def stop_watcher() -> None:
    """Stop this process's watcher and wait for its threads (tests, benchmarks)."""
    global _watcher
    with _lock:
        watcher, _watcher = _watcher, None
    if watcher is not None:
        watcher.close()


def changes_heard() -> int:
    """How many committed changes this process's watcher has heard of (tests)."""
    with _lock:
        return _generation


def wait_until_fresh(key: Hashable, timeout_s: float = 30.0) -> bool:
    """Wait until `key`'s memoised value holds the data as they are now (tests, benchmarks):
    what the watcher does after a change. False if it did not come within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _fresh(key, data_version()) is not None:
            return True
        time.sleep(0.005)
    return False


def forget() -> None:
    """Drop every memoised value (tests, benchmarks)."""
    with _lock:
        _memo.clear()
