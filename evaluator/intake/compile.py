"""The compile pass: every solution file is imported once, in parallel, before any rank runs.

A solution that builds a CUDA extension at import time (`evaluator.runtime.load_cuda`)
builds it here, on all cores at once for the whole bundle (a cold `load_inline` takes
~48 s on the H200 hosts), into the evaluation's own extension cache; the candidate ranks
then import the same file and load the cached build. A file that fails to import here is a
compile error and never reaches the ranks.

Each import runs in a spawned process of its own, set up as a candidate rank is: its own
process group (killed whole, compilers included), the candidate environment, the bundle
folder as working directory, its output in a log, no file past the size cap. It answers in
JSON only, like a rank: this process holds the seed secret.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from evaluator.contract import cap_log
from evaluator.host import rlimits, sandbox
from evaluator.judge.processes import KILL_VERIFY_S, how_it_ended, read_log, wait_groups_empty
from evaluator.rank_process import (
    confine_output,
    describe,
    die_with_parent,
    flush,
    import_solution,
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
    ctx = multiprocessing.get_context("spawn")
    queue = list(modules.items())
    limit = max(1, min(len(queue), parallel or os.cpu_count() or 1))
    running: list[_Running] = []
    failures: dict[str, ImportFailure] = {}
    try:
        while queue or running:
            while queue and len(running) < limit:
                filename, module = queue.pop(0)
                job = _Job(
                    path=str(folder / filename),
                    module=module,
                    env=dict(env),
                    log_path=str(logs / f"import-{module}.log"),
                    limits=limits,
                )
                sandbox.candidate_file(Path(job.log_path), identity)
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
    # The import process made its own process group (its pid) first thing, or has not run
    # yet and started nothing: signal both, then wait until no member of the group is left.
    for send in (os.killpg, os.kill):
        try:
            send(item.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    item.proc.join(KILL_VERIFY_S)
    survivors = wait_groups_empty([item.proc.pid], KILL_VERIFY_S)
    if survivors:
        log.error("processes %s of the import of %s survived SIGKILL", survivors, item.filename)
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
    try:
        import_solution(Path(job.path), job.module)
        reply: dict[str, Any] = {"ok": True}
    except BaseException as exc:  # SystemExit at import is the file's failure too
        traceback.print_exc()
        reply = {"ok": False, "error": describe(exc)}
    flush()
    conn.send_bytes(json.dumps(reply).encode("utf-8"))
    # No atexit hooks, no waiting on threads the import left running: the parent kills
    # our process group next anyway.
    os._exit(0)
