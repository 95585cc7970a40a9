"""Calling an evaluation off while it runs (the portal cancelled the attempt, or a requeue
superseded it).

Stopping is asked from another thread (the one watching the portal's stop signal) while
the evaluating thread waits on its ranks: that thread only kills the ranks' processes;
the evaluating thread sees them die, learns why here, and cleans up as after any failure.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol


class EvaluationStopped(Exception):
    """The portal called the attempt off (cancelled, or superseded by a requeue): the
    evaluation ends without a result, since none would be recorded."""


class Killable(Protocol):
    def kill_processes(self) -> None: ...


_stop_reason: list[str] = []
_stop_lock = threading.Lock()
_live_pools: weakref.WeakSet[Killable] = weakref.WeakSet()


def register(pools: Killable) -> None:
    """Rank pools a stop must kill while they live."""
    with _stop_lock:
        _live_pools.add(pools)


def request_stop(reason: str) -> None:
    """Stop this process's evaluation: kill every rank now, refuse to start new ones."""
    with _stop_lock:
        if not _stop_reason:
            _stop_reason.append(reason)
        pools = list(_live_pools)
    for pools_of_bundle in pools:
        pools_of_bundle.kill_processes()


def clear_stop() -> None:
    """A new evaluation begins: a stop asked of the last one does not apply."""
    with _stop_lock:
        _stop_reason.clear()


def raise_if_stopped() -> None:
    with _stop_lock:
        reason = _stop_reason[0] if _stop_reason else ""
    if reason:
        raise EvaluationStopped(reason)
