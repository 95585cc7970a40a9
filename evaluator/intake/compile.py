"""The compile pass: every solution file is imported once, in parallel, before any rank runs.

A solution that builds a CUDA extension at import time (`evaluator.runtime.load_cuda`)
builds it here, on all cores at once for the whole bundle (a cold `load_inline` takes
~48 s on the H200 hosts), into the evaluation's own extension cache; the candidate ranks
then import the same file and load the cached build. A file that fails to import here is a
compile error and never reaches the ranks.

Each import runs in a process of its own, set up as a candidate rank is: its own process
group (killed whole, compilers included), the candidate environment, the bundle folder as
working directory, its output in a log, no file past the size cap. It answers in JSON
only, like a rank: this process holds the seed secret. Those processes are forked by the
bundle's import server (`import_server.py`), spawned fresh into the bundle's sandbox,
which imports torch once for all of them and never imports bundle code itself. Should the
server die or stop answering, the files it had not answered for are imported again, each
in a process spawned fresh for it (as before the server existed), so the file that failed
is the one named.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from evaluator.contract import cap_log
from evaluator.host import rlimits, sandbox
from evaluator.intake import import_server
from evaluator.intake.import_server import ImportJob, ServerSetup
from evaluator.judge.processes import (
    DEATH_GRACE_S,
    KILL_VERIFY_S,
    how_it_ended,
    read_log,
    wait_groups_empty,
)
from evaluator.rank_process import (
    confine_output,
    die_with_parent,
    scrub_environment,
)

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 64 * 1024


@dataclass(frozen=True)
class ImportFailure:
    error: str  # "NameError: name 'x' is not defined", "took longer than 120 s", ...
    log: str  # the import's output, traceback included


@dataclass(frozen=True)
class _Job:
    path: str
    module: str
    env: dict[str, str]
    log_path: str
    limits: rlimits.Limits | None = None


@dataclass
class _Running:
    filename: str
    job: _Job
    proc: Any
    conn: Connection
    deadline: float


def import_solutions(
    modules: Mapping[str, str],
    *,
    folder: Path,
    env: Mapping[str, str],
    logs: Path,
    timeout_s: float,
    parallel: int | None = None,
    limits: rlimits.Limits | None = None,
    executable: str | None = None,
    identity: sandbox.Identity | None = None,
) -> dict[str, ImportFailure]:
    """Import each file of `modules` (file name -> module name) in `folder`; the failures.

    At most `parallel` (default: the CPU count) imports at a time, each given `timeout_s`.
    """
    jobs = {
        filename: _Job(
            path=str(folder / filename),
            module=module,
            env=dict(env),
            log_path=str(logs / f"import-{module}.log"),
            limits=limits,
        )
        for filename, module in modules.items()
    }
    for job in jobs.values():
        sandbox.candidate_file(Path(job.log_path), identity)
    limit = max(1, min(len(jobs), parallel or os.cpu_count() or 1))
    if not jobs:
        return {}
    server_log = logs / "import-server.log"
    sandbox.candidate_file(server_log, identity)
    setup = ServerSetup(env=dict(env), log_path=str(server_log), limits=limits)
    failures, left = _through_server(jobs, setup, timeout_s, limit, executable)
    if left:
        log.warning("the import server failed; importing %s each in a process of its own", left)
        failures.update(
            _each_alone({name: jobs[name] for name in left}, timeout_s, limit, executable)
        )
    return failures


@dataclass
class _Served:
    filename: str
    job: _Job
    conn: Connection  # the read end of the pipe its child answers on
    deadline: float = math.inf
    started: bool = False  # the server says it forked the child
    status: int | None = None  # the server says the child ended so (exit code, -signal)


class _ServerFailed(Exception):
    pass


def _through_server(
    jobs: dict[str, _Job], setup: ServerSetup, timeout_s: float, limit: int, executable: str | None
) -> tuple[dict[str, ImportFailure], list[str]]:
    """The failures of the files the import server answered for, and the files it did not."""
    ctx = multiprocessing.get_context("spawn")
    names = list(jobs)
    pipes = [ctx.Pipe(duplex=False) for _ in names]
    commands, server_end = ctx.Pipe(duplex=True)
    served = [
        _Served(name, jobs[name], reader) for name, (reader, _) in zip(names, pipes, strict=True)
    ]
    server = ctx.Process(
        target=import_server.serve,
        args=(
            server_end,
            setup,
            [ImportJob(job.path, job.module, job.log_path) for job in jobs.values()],
            [writer for _, writer in pipes],
        ),
        name="pkb-import-server",
    )
    failures: dict[str, ImportFailure] = {}
    queue, running = list(range(len(names))), []
    try:
        with sandbox.spawning_with(executable):
            server.start()
        server_end.close()
        for _, writer in pipes:
            writer.close()  # the server's and then its child's alone: their exit is its end
        while queue or running:
            while queue and len(running) < limit:
                index = queue.pop(0)
                commands.send_bytes(json.dumps({"go": index}).encode("utf-8"))
                served[index].deadline = time.monotonic() + timeout_s
                running.append(index)
            timeout = max(0.0, min(served[i].deadline for i in running) - time.monotonic())
            wait([commands, server.sentinel, *(served[i].conn for i in running)], timeout)
            _hear(commands, served, 0.0)
            if not server.is_alive():
                raise _ServerFailed
            for index in list(running):
                error = _served_outcome(served[index], commands, served, timeout_s)
                if error is _PENDING:
                    continue
                running.remove(index)
                if error is not None:
                    failures[names[index]] = ImportFailure(str(error), _log_of(served[index].job))
    except (_ServerFailed, OSError, EOFError):
        # Dead, stuck, or its pipe broken: keep what its children answered, redo the rest.
        for index in list(running):
            reply = _reply(served[index].conn)
            if isinstance(reply, dict) and reply.get("ok") is True:
                running.remove(index)
            elif isinstance(reply, dict) and "error" in reply:
                running.remove(index)
                failures[names[index]] = ImportFailure(
                    str(reply["error"])[:500], _log_of(served[index].job)
                )
    finally:
        _stop(server, "the import server")
        commands.close()
        for item in served:
            item.conn.close()
    return failures, [names[i] for i in running + queue]


_PENDING = object()


def _served_outcome(
    item: _Served, commands: Connection, served: list[_Served], timeout_s: float
) -> Any:
    """_PENDING while the import runs, None when it succeeded, else what went wrong."""
    if item.conn.poll():
        reply = _reply(item.conn)
        if isinstance(reply, dict):
            return None if reply.get("ok") is True else str(reply.get("error", "?"))[:500]
        if reply is not None:
            return "the importing process sent a malformed answer"
        # It died without a word: the server says how, or has just not said it yet.
        if item.status is None:
            _hear(commands, served, DEATH_GRACE_S, awaited=item)
        return f"the importing process {_ended(item.status)}"
    if item.status is not None:  # ended, its pipe still held by something it started
        return f"the importing process {_ended(item.status)}"
    if time.monotonic() < item.deadline:
        return _PENDING
    if not item.started:
        raise _ServerFailed  # the server never forked it: the server hangs, not the file
    with contextlib.suppress(OSError):
        commands.send_bytes(json.dumps({"kill": served.index(item)}).encode("utf-8"))
    return f"took longer than {timeout_s:g} s"


def _reply(conn: Connection) -> Any:
    """A child's reply: a JSON value, `False` for bytes that are not one, None for none."""
    try:
        if not conn.poll():
            return None
        return json.loads(conn.recv_bytes(MAX_REPLY_BYTES))
    except (EOFError, OSError):
        return None
    except ValueError:
        return False


def _hear(
    commands: Connection, served: list[_Served], timeout_s: float, awaited: _Served | None = None
) -> None:
    """Read what the server said (which children it started, how which ended), data only:
    all it has said, and for up to `timeout_s` more until it says how `awaited` ended."""
    end = time.monotonic() + timeout_s
    while commands.poll(max(0.0, end - time.monotonic()) if awaited else 0.0):
        try:
            message = json.loads(commands.recv_bytes(MAX_REPLY_BYTES))
        except ValueError:
            raise _ServerFailed from None
        if not isinstance(message, dict):
            raise _ServerFailed
        started, ended, status = message.get("started"), message.get("ended"), message.get("status")
        if _is_index(started, served):
            served[started].started = True
        if _is_index(ended, served) and isinstance(status, int):
            served[ended].status = status
        if awaited is not None and awaited.status is not None:
            awaited = None


def _is_index(value: Any, served: list[_Served]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(served)


def _ended(status: int | None) -> str:
    if status is None:
        return "closed its connection"
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with code {status}"


def _stop(proc: Any, what: str) -> None:
    """Kill `proc` and its process group, and wait until no member of it is left."""
    if proc.pid is None:
        return  # it never started (the launcher could not run): nothing to kill
    # It made its own process group (its pid) first thing, or has not run yet and
    # started nothing: signal both.
    for send in (os.killpg, os.kill):
        try:
            send(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.join(KILL_VERIFY_S)
    survivors = wait_groups_empty([proc.pid], KILL_VERIFY_S)
    if survivors:
        log.error("processes %s of %s survived SIGKILL", survivors, what)


def _each_alone(
    jobs: dict[str, _Job], timeout_s: float, limit: int, executable: str | None
) -> dict[str, ImportFailure]:
    """Import each file in a process spawned for it alone."""
    ctx = multiprocessing.get_context("spawn")
    queue = list(jobs.items())
    running: list[_Running] = []
    failures: dict[str, ImportFailure] = {}
    try:
        while queue or running:
            while queue and len(running) < limit:
                filename, job = queue.pop(0)
                with sandbox.spawning_with(executable):
                    running.append(_start(ctx, filename, job, timeout_s))
            _wait_for_any(running)
            for item in [r for r in running if _finished(r)]:
                running.remove(item)
                error = _outcome(item, timeout_s)
                _kill(item)
                if error is not None:
                    failures[item.filename] = ImportFailure(error, _log_of(item.job))
    finally:
        for item in running:
            _kill(item)
    return failures


def _start(ctx: Any, filename: str, job: _Job, timeout_s: float) -> _Running:
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_import_main, args=(child_end, job), name=f"pkb-import-{filename}")
    proc.start()
    child_end.close()
    return _Running(filename, job, proc, parent_end, time.monotonic() + timeout_s)


def _wait_for_any(running: list[_Running]) -> None:
    timeout = max(0.0, min(r.deadline for r in running) - time.monotonic())
    wait([x for r in running for x in (r.conn, r.proc.sentinel)], timeout=timeout)


def _finished(item: _Running) -> bool:
    return item.conn.poll() or not item.proc.is_alive() or time.monotonic() >= item.deadline


def _outcome(item: _Running, timeout_s: float) -> str | None:
    """None when the import succeeded, else what went wrong."""
    if item.conn.poll():
        try:
            reply = json.loads(item.conn.recv_bytes(MAX_REPLY_BYTES))
        except (EOFError, OSError):
            reply = None  # it died without a word: say how, below
        except ValueError:
            return "the importing process sent a malformed answer"
        if isinstance(reply, dict):
            return None if reply.get("ok") is True else str(reply.get("error", "?"))[:500]
        if reply is not None:
            return "the importing process sent a malformed answer"
    if item.proc.is_alive() and time.monotonic() >= item.deadline:
        return f"took longer than {timeout_s:g} s"
    return f"the importing process {how_it_ended(item.proc)}"


def _kill(item: _Running) -> None:
    _stop(item.proc, f"the import of {item.filename}")
    item.conn.close()


def _log_of(job: _Job) -> str:
    text = read_log(Path(job.log_path), 0)
    return cap_log(f"--- import ---\n{text.rstrip()}\n") if text.strip() else ""


def _import_main(conn: Connection, job: _Job) -> None:
    os.setpgid(0, 0)  # first: from here on the parent can kill us and all we start
    die_with_parent()
    scrub_environment(job.env)
    confine_output(job.log_path)
    if job.limits is not None:
        # No CUDA context is made for an import, but extensions may make one: no RLIMIT_AS.
        rlimits.apply_limits(job.limits, cuda=True)
    import_server.import_and_answer(job.path, job.module, conn)
