"""Processes of the rank pools: how one ended, killing a process group for certain,
freezing a runner's rank while the other runner is timed, and reading a log a rank wrote
(never through a link)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evaluator.host import cgroups, cleanup

KILL_VERIFY_S = 5.0
# How long to wait for a rank's death to become visible after a peer reported an error:
# a rank that crashes makes its peers' collectives fail, and the crash is the real story.
DEATH_GRACE_S = 0.5
# How long a judge waits for a runner's rank's cgroup to say it is frozen, or thawed: the
# kernel freezes each task as it next leaves the kernel, and on the 2-core test machine a
# spinning process of two threads took 43 ms (2026-11-29).
FREEZE_WAIT_S = 1.0


def how_it_ended(proc: Any) -> str:
    proc.join(DEATH_GRACE_S)
    code = proc.exitcode
    if code is None:
        return "closed its connection"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def signal_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextlib.contextmanager
def frozen(freezer: str | None) -> Iterator[None]:
    """The cgroup holding every process of a runner's rank (host/cgroups.py, `Freezers`)
    frozen for the duration, then thawed, each waited for until the kernel says it is done
    (cgroup.events' `frozen 1` / `frozen 0` on v2, freezer.state on v1). A judge freezes
    each of its runners while the other runner's rounds run (judge/turns.py): whatever
    bundle code started, in the runner's process group or out of it (setsid), stands still
    while the reference is timed, and both runners meet their own rounds alike, just thawed.

    No signal is sent. A SIGSTOP cannot be caught, but the SIGCONT that ends it can: bundle
    code with a handler on it counted continues and told which side of a pair went first
    (issue 39). Freezing and thawing run no handler: the kernel parks each task as it next
    leaves the kernel, with no signal pending, and lets it go on where it was.

    Without `freezer` (a host that gives none) nothing is done: neither runner stops, so
    a process bundle code forked can take the reference's CPU while it is timed. That is
    a development host's path, reported as `candidate_frozen: false` in the evaluation's
    environment (docs/security.md): a stop by signal instead would hand the candidate a
    signal to count."""
    if not freezer:
        yield
        return
    _freeze(freezer, True)
    try:
        yield
    finally:
        _freeze(freezer, False)


def _freeze(freezer: str, freeze: bool) -> None:
    """Freeze or thaw; a judge goes on either way and says so in its log: a task that has
    not frozen in time is inside the kernel (a task leaving it freezes), not on a core."""
    what = "frozen" if freeze else "thawed"
    try:
        if not cgroups.set_frozen(Path(freezer), freeze, timeout_s=FREEZE_WAIT_S):
            print(f"pkb judge: {freezer} not {what} in time", file=sys.stderr)
    except OSError as exc:
        print(f"pkb judge: {freezer} not {what}: {exc}", file=sys.stderr)


def signal_pid(pid: int) -> None:
    # A rank that has not made its own group yet is still in ours: never killpg that one.
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def live_members(groups: list[int]) -> list[int]:
    """Processes of these process groups that still run (zombies do not count)."""
    wanted = set(groups)
    if not wanted:
        return []
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel about each group instead
        return [g for g in wanted if _group_exists(g)]
    return [
        pid
        for pid, fields in cleanup.process_stats()
        if len(fields) > 2 and int(fields[2]) in wanted and fields[0] not in ("Z", "X")
    ]


def pid_running(pid: int) -> bool:
    """True if `pid` is a process that still runs (a zombie has stopped running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return _pid_exists(pid)
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _group_exists(group: int) -> bool:
    return _signal_reaches(os.killpg, group)


def _pid_exists(pid: int) -> bool:
    return _signal_reaches(os.kill, pid)


def _signal_reaches(send: Any, target: int) -> bool:
    """Whether signal 0 finds `target` (one we may not signal still exists)."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_groups_empty(groups: list[int], timeout_s: float) -> list[int]:
    # Polling the kernel's view is the only way to see grandchildren we are not parent of.
    end = time.monotonic() + timeout_s
    while True:
        survivors = live_members(groups)
        if not survivors or time.monotonic() > end:
            return survivors
        for group in groups:
            signal_group(group)
        time.sleep(0.05)


def size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_log(path: Path, offset: int, limit: int = 64 * 1024) -> str:
    """What a log gained after `offset`; only its head and tail when that is long."""
    size = size_of(path)
    if size <= offset:
        return ""
    # Never through a link: bundle code must not make the trusted side read another file.
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
        f.seek(offset)
        if size - offset <= 2 * limit:
            data = f.read()
        else:
            head = f.read(limit)
            f.seek(size - limit)
            data = head + b"\n...\n" + f.read(limit)
    return data.decode("utf-8", "replace")
