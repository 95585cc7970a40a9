"""Processes of the rank pools: how one ended, killing a process group for certain, and
reading a log a rank wrote (never through a link)."""

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
# How long a judge waits for the threads of a runner it stopped to show stopped, or of one
# it continued to show stopped no more (`settle`).
STOP_SETTLE_S = 0.05
PAUSED_STATES = frozenset("Tt")  # stopped, traced
STOPPED_STATES = PAUSED_STATES | frozenset("ZX")  # or gone: zombie, dead


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
def stopped(group: int | None, freezer: str | None = None) -> Iterator[None]:
    """Process group `group` stopped (SIGSTOP, which no process can catch or ignore) for
    the duration, then continued; with `freezer`, the cgroup holding every process of the
    runner's rank frozen too (host/cgroups.py, `Freezers`). A judge stops each
    of its runners' groups while the other runner's rounds run (judge/turns.py): a process
    bundle code forked to steal CPU from the reference while it is timed stops with the
    candidate's runner, one that left the group (setpgid, setsid) freezes with its rank,
    and both runners meet their own rounds the same way, just continued. Where the host
    gives no freezer such a leaver runs on until the evaluation's end, when the subreaper
    kills it (docs/security.md)."""
    if not group:
        yield
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGSTOP)
        settle(group)
    if freezer:  # after the stop: a frozen thread would never show stopped
        _freeze(freezer, True)
    try:
        yield
    finally:
        if freezer:
            _freeze(freezer, False)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGCONT)
            settle(group, want_stopped=False)


def _freeze(freezer: str, frozen: bool) -> None:
    """Freeze or thaw; a judge goes on either way (the process group's stop still holds),
    and says so in its log."""
    what = "frozen" if frozen else "thawed"
    try:
        if not cgroups.set_frozen(Path(freezer), frozen, timeout_s=STOP_SETTLE_S):
            print(f"pkb judge: {freezer} not {what} in time", file=sys.stderr)
    except OSError as exc:
        print(f"pkb judge: {freezer} not {what}: {exc}", file=sys.stderr)


def settle(leader: int, *, want_stopped: bool = True, timeout_s: float = STOP_SETTLE_S) -> bool:
    """Wait until every thread of process `leader` has stopped or exited (`want_stopped`),
    or until none shows stopped any more, at most `timeout_s`; whether it came to that.
    A SIGSTOP wakes each thread of a process to stop itself, and a SIGCONT each to go on:
    on GPU hosts the runners share one core, so without the wait the threads of a runner
    just stopped, or just continued, would take turns on it inside the other's rounds."""
    end = time.monotonic() + timeout_s
    while True:
        found = thread_states(leader)
        if found is None or _settled(found, want_stopped):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.0002)


def _settled(states: list[str], want_stopped: bool) -> bool:
    if want_stopped:
        return all(state in STOPPED_STATES for state in states)
    return not any(state in PAUSED_STATES for state in states)


def thread_states(pid: int, proc: str = "/proc") -> list[str] | None:
    """The scheduler state letter of each thread of `pid` (/proc/PID/task/TID/stat's third
    field); None where the process is gone or its threads cannot be read."""
    try:
        tasks = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return None
    states = []
    for tid in tasks:
        try:
            text = Path(f"{proc}/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        # "TID (comm) S ...": the command may hold spaces and parentheses.
        states.append(text[text.rfind(")") + 2 : text.rfind(")") + 3])
    return states


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
