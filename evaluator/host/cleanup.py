"""The next evaluation starts clean: orphans of bundle code are found and killed (the
evaluating process is a child subreaper), and what bundle code left in /dev/shm, /tmp,
/var/tmp and /run/lock is removed. Trusted side only; kept out of `sandbox.py`, whose
launcher runs as a script."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from evaluator.host.sandbox import Identity, libc

_PR_SET_CHILD_SUBREAPER = 36
SHM_DIR = Path("/dev/shm")
# The world-writable folders bundle code may leave files in (a planted sitecustomize.py, a
# lock, 64 MiB of anything): what it made there during an evaluation goes after it.
LITTER_DIRS = (SHM_DIR, Path("/tmp"), Path("/var/tmp"), Path("/run/lock"))

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


def _children_since(since_ticks: int, *, dead: bool = False) -> list[int]:
    """Our children started since `since_ticks`: the live ones, or with `dead` those
    that have exited and wait to be reaped (zombies)."""
    me = os.getpid()
    return [
        pid
        for pid, fields in process_stats()
        if int(fields[1]) == me and int(fields[19]) >= since_ticks and (fields[0] == "Z") == dead
    ]


def now_ticks() -> int:
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def reap_orphans(*, since_ticks: int, keep: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """Kill and reap our children started since `since_ticks` that are not in `keep`;
    those that exited already are reaped and not counted (none of them was left running).

    With `become_subreaper`, that is whatever bundle code detached from its rank. Repeats
    until none is left, since a process being killed may have forked once more.
    """
    keep = set(keep)
    for pid in _children_since(since_ticks, dead=True):
        if pid not in keep:  # exited already, nothing of it left running: reap only
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
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


def litter_entries(folders: tuple[Path, ...] = LITTER_DIRS) -> dict[Path, set[str]]:
    """The names in each folder bundle code may leave files in, as they are now."""
    found = {}
    for folder in folders:
        try:
            found[folder] = {p.name for p in folder.iterdir()}
        except OSError:
            continue
    return found


def _litter_owners(folder: Path, identity: Identity | None) -> set[int]:
    if identity is not None:
        return {identity.uid}
    return {os.getuid()} if folder == SHM_DIR else set()


def remove_litter(
    before: dict[Path, set[str]], *, since: float, identity: Identity | None = None
) -> list[str]:
    """Remove what bundle code left in the world-writable folders: entries that were not
    there before and were made after `since` by the candidate user. In /dev/shm also,
    where bundle code runs as this process's user, that user's (shared memory names are
    bundle code's or the ranks'). Never root's entries when bundle code ran as another
    user, nor this user's in /tmp and the like: they belong to the worker (its scratch
    folder, multiprocessing's) or to other processes on the host, which may still use
    them."""
    removed = []
    for folder, names in before.items():
        owners = _litter_owners(folder, identity)
        for name in litter_entries((folder,)).get(folder, set()) - names:
            path = folder / name
            with contextlib.suppress(OSError):
                stat = path.lstat()
                if stat.st_ctime >= since - 1 and stat.st_uid in owners:
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink()
                    removed.append(str(path))
    return removed
