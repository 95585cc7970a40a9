"""Resource limits of each process running bundle code (compile pass and candidate ranks):
CPU seconds, address space (CPU backends only: CUDA reserves terabytes of virtual
addresses), open files, tasks, file size, no core dumps.

Stdlib only, like the rest of the sandbox (evaluator/host/sandbox.py).
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    """Per process running bundle code. 0 leaves a limit as the worker's."""

    cpu_s: int = 0
    memory_bytes: int = 0  # RLIMIT_AS, applied only where no CUDA context is expected
    open_files: int = 0
    tasks: int = 0  # RLIMIT_NPROC: processes and threads of the user (see apply_limits)
    file_bytes: int = 0  # RLIMIT_FSIZE: no file written, logs included, grows past it


def apply_limits(limits: Limits, *, cuda: bool) -> list[str]:
    """Set the limits on this process (inherited by all it starts); what could not be set."""
    wanted: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    if limits.cpu_s:
        wanted.append((resource.RLIMIT_CPU, limits.cpu_s))
    if limits.memory_bytes and not cuda:
        wanted.append((resource.RLIMIT_AS, limits.memory_bytes))
    if limits.open_files:
        wanted.append((resource.RLIMIT_NOFILE, limits.open_files))
    if limits.file_bytes:
        wanted.append((resource.RLIMIT_FSIZE, limits.file_bytes))
    if limits.tasks:
        # The kernel counts the tasks (threads too) of the real user in this user
        # namespace: in a jail, only the evaluation's own; outside one, the worker's and
        # everything else of its user too, so there the cap is on top of those.
        base = 0 if in_user_namespace() else _tasks_now()
        wanted.append((resource.RLIMIT_NPROC, base + limits.tasks))
    failed = []
    for which, value in wanted:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError) as exc:
            failed.append(f"{which}: {exc}")
    return failed


def in_user_namespace() -> bool:
    """True inside a user namespace of ours (the initial one maps the whole uid range)."""
    try:
        fields = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return False
    return fields[2:3] != ["4294967295"]


def _tasks_now() -> int:
    """Tasks (threads count) of this real uid visible from here; RLIMIT_NPROC counts these."""
    uid, count = os.getuid(), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = (entry / "status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"].strip())
    return count
