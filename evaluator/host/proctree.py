"""Processes as /proc shows them: children, descendants, pid namespaces, and from them the
pids the sandboxes (evaluator/host/bubblewrap.py) and the rank pools need: a holder's
Python, and the rank that a launch started.

Stdlib only.
"""

from __future__ import annotations

import os
from pathlib import Path


def inner_pid(bwrap_pid: int) -> int:
    """The holder's Python, the deepest of bwrap's descendants (bwrap stays outside, its
    child is the pid namespace's init): its /proc/<pid>/ns name the sandbox's namespaces."""
    pid = bwrap_pid
    while children := child_pids(pid):
        pid = children[0]
    if pid == bwrap_pid:
        raise RuntimeError(f"bwrap {bwrap_pid} has no child")
    return pid


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: its children, theirs, and so on."""
    found, todo = [], [pid]
    while todo:
        children = child_pids(todo.pop())
        found += children
        todo += children
    return found


def pids() -> list[int]:
    """Every process in this pid namespace."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def pid_namespace(pid: int) -> str:
    """The pid namespace `pid` is in (its ns/pid link, as "pid:[inode]"); "" once gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def child_pids(pid: int) -> list[int]:
    """The children of `pid` (of its main thread: those of the others are not listed)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def nspid(pid: int) -> list[int]:
    """A process's pid in each pid namespace it is in, outermost first."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def rank_pid(launched: int) -> int:
    """The host pid of the rank process that `launched` started: the launcher's only child
    in a sandbox (it forks the rank into the pid namespace and waits), else the launcher
    itself (it exec'd the rank). Never what the rank says: inside, its pid is another."""
    children = child_pids(launched)
    inside = len(children) == 1 and len(nspid(children[0])) > len(nspid(launched))
    return children[0] if inside else launched
