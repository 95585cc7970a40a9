"""The next evaluation starts clean: orphans of bundle code are found and killed (the
evaluating process is a child subreaper), and /dev/shm entries bundle code made are
removed. Trusted side only; kept out of `sandbox.py`, whose launcher runs as a script."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from evaluator.host.sandbox import Identity, libc

_PR_SET_CHILD_SUBREAPER = 36
SHM_DIR = Path("/dev/shm")

log = logging.getLogger(__name__)


def become_subreaper() -> bool:
    """Orphans of our descendants become our children instead of init's."""
    try:
        return libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name) of every process.

    The fields start at the state: [0] state, [1] ppid, [2] process group, ..., [19] start
    time in clock ticks since boot. The name (in parentheses) may hold spaces and
    parentheses itself, hence the split at the last ")"."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        yield int(entry.name), stat[stat.rfind(")") + 2 :].split()


def _children_since(since_ticks: int) -> list[int]:
    me = os.getpid()
    return [
        pid
        for pid, fields in process_stats()
        if int(fields[1]) == me and int(fields[19]) >= since_ticks
    ]


def now_ticks() -> int:
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def reap_orphans(*, since_ticks: int, keep: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """Kill and reap our children started since `since_ticks` that are not in `keep`.

    With `become_subreaper`, that is whatever bundle code detached from its rank. Repeats
    until none is left, since a process being killed may have forked once more.
    """
    keep = set(keep)
    killed: list[int] = []
    end = time.monotonic() + timeout_s
    while True:
        orphans = [p for p in _children_since(since_ticks) if p not in keep]
        if not orphans:
            return killed
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            if pid not in killed:
                killed.append(pid)
        if time.monotonic() > end:
            log.error("orphans of bundle code survive SIGKILL: %s", orphans)
            return killed


def shm_entries() -> set[str]:
    try:
        return {p.name for p in SHM_DIR.iterdir()}
    except OSError:
        return set()


def remove_new_shm(
    before: set[str], *, since: float, identity: Identity | None = None
) -> list[str]:
    """Remove /dev/shm entries that were not there before and were made after `since` by
    bundle code: the candidate user's, or where bundle code runs as this process's user,
    that user's. Never root's entries when bundle code ran as another user: they belong to
    the worker or to other processes on the host, which may still use them."""
    owners = {identity.uid} if identity else {os.getuid()}
    removed = []
    for name in shm_entries() - before:
        path = SHM_DIR / name
        with contextlib.suppress(OSError):
            if path.lstat().st_ctime >= since - 1 and path.lstat().st_uid in owners:
                if path.is_dir() and not path.is_symlink():
                    import shutil

                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink()
                removed.append(name)
    return removed
