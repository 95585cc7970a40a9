"""The compile pass's import server: one per bundle, inside that bundle's sandbox.

It is spawned fresh through the sandbox launcher, like any process that runs bundle code
(the candidate user, the evaluation's bubblewrap container and cgroup, the scrubbed
environment, the limits), imports torch once, and then forks one child per solution file
when the trusted side says so ("go"). Each child imports its one file and answers on a
pipe of its own, which the trusted side handed over at spawn; the server itself never
imports bundle code, and says only which child it started and how each ended. On the
2-core test machine a sandboxed `import torch` takes 2-3 s: eight files each in a fresh
process took 8-12 s for a bundle of ten-line files, forking them from here well under a
second (docs/measurements/2026-11-29-turnaround.md).

Every message it sends is data for the trusted side to check: a child (same user, same
sandbox) may kill or stop the server, which the trusted side notices and answers by
importing what is left each in a process of its own (evaluator/intake/compile.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from evaluator.host import rlimits, sandbox
from evaluator.rank_process import (
    confine_output,
    describe,
    die_with_parent,
    flush,
    import_solution,
    scrub_environment,
)

# How often the server looks for children that ended while no command comes.
REAP_EVERY_S = 0.05


@dataclass(frozen=True)
class ImportJob:
    path: str
    module: str
    log_path: str


@dataclass(frozen=True)
class ServerSetup:
    env: dict[str, str]
    log_path: str  # the server's own output: its torch import, never bundle code's
    limits: rlimits.Limits | None = None


def serve(
    commands: Connection, setup: ServerSetup, jobs: list[ImportJob], answers: list[Connection]
) -> None:
    """The server's main: `answers[i]` is the write end of job i's pipe to the trusted side."""
    os.setpgid(0, 0)  # first: from here on the parent can kill us and all we start
    die_with_parent()
    # The children run as the same user in the same pid namespace: they must not read or
    # write this process (its pipes to the trusted side) through /proc.
    sandbox.not_dumpable()
    scrub_environment(setup.env)
    confine_output(setup.log_path)
    if setup.limits is not None:
        # Inherited by every child; a child's CPU seconds count from its fork.
        rlimits.apply_limits(setup.limits, cuda=True)
    _preload()
    children: dict[int, int] = {}  # pid -> job index
    while True:
        if wait([commands], timeout=REAP_EVERY_S):
            try:
                command = json.loads(commands.recv_bytes(4096))
            except (EOFError, OSError, ValueError):
                os._exit(0)  # the trusted side is gone or done: so are we
            _obey(command, commands, jobs, answers, children)
        _reap(commands, children)


def _preload() -> None:
    # What the solutions import, so that each child has it already: no bundle code here.
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401

    import evaluator.runtime  # noqa: F401


def _obey(
    command: Any,
    commands: Connection,
    jobs: list[ImportJob],
    answers: list[Connection],
    children: dict[int, int],
) -> None:
    if not isinstance(command, dict):
        return
    index = command.get("go")
    if isinstance(index, int) and 0 <= index < len(jobs):
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _child(server, index, jobs[index], answers, commands)
            finally:
                os._exit(70)
        answers[index].close()  # the child's now: its end of file is the child's and its own
        children[pid] = index
        _send(commands, {"started": index})
        return
    index = command.get("kill")
    for pid, job in list(children.items()):
        if job == index:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _reap(commands: Connection, children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        index = children.pop(pid, None)
        if index is not None:
            _send(commands, {"ended": index, "status": os.waitstatus_to_exitcode(status)})


def _send(commands: Connection, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        commands.send_bytes(json.dumps(message).encode("utf-8"))


def _child(
    server: int, index: int, job: ImportJob, answers: list[Connection], commands: Connection
) -> None:
    die_with_parent()
    if os.getppid() != server:
        os._exit(70)  # the server died before we could follow it
    # Before bundle code runs: nothing of the server's but this file's own pipe stays open.
    commands.close()
    for other, conn in enumerate(answers):
        if other != index and not conn.closed:
            conn.close()
    confine_output(job.log_path)
    import_and_answer(job.path, job.module, answers[index])


def import_and_answer(path: str, module: str, conn: Connection) -> None:
    """Import one bundle file, say on `conn` how it went, and end at once: no atexit hooks,
    no waiting on threads the import left running (the trusted side kills this process's
    group next anyway). A forked child of the server and a fresh process alike."""
    try:
        import_solution(Path(path), module)
        reply: dict[str, Any] = {"ok": True}
    except BaseException as exc:  # SystemExit at import is the file's failure too
        traceback.print_exc()
        reply = {"ok": False, "error": describe(exc)}
    flush()
    conn.send_bytes(json.dumps(reply).encode("utf-8"))
    os._exit(0)
