"""Pools of rank processes: start them, talk to them, and kill them for certain.

The parent sends commands as pickles (it is the trusted side) and reads replies as JSON
bytes only, so a candidate process cannot smuggle a pickle into the process that holds the
seed secret. Every rank puts itself in its own process group first thing, so that killing
the group also kills whatever the rank started.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from evaluator import sandbox
from evaluator.contract import cap_log
from evaluator.ranks import RankSetup, candidate_main, judge_main

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 4 * 1024 * 1024
# How long to wait for a rank's death to become visible after a peer reported an error:
# a rank that crashes makes its peers' collectives fail, and the crash is the real story.
DEATH_GRACE_S = 0.5
KILL_VERIFY_S = 5.0
POOL_START_TIMEOUT_S = 180.0
# Judges only finish the reference of the command they were on; they need no deadline of
# the candidate's size to come to rest.
SETTLE_S = 60.0


@dataclass(frozen=True)
class Reply:
    kind: str
    rank: int
    data: dict[str, Any]


class RankDied(Exception):
    def __init__(self, kind: str, rank: int, how: str) -> None:
        super().__init__(f"{kind} rank {rank} {how}")
        self.kind, self.rank, self.how = kind, rank, how


class PoolTimeout(Exception):
    def __init__(self, replies: list[Reply], pending: list[tuple[str, int]]) -> None:
        super().__init__(f"no reply from {pending}")
        self.replies, self.pending = replies, pending


class ProtocolViolation(Exception):
    """A rank sent what the harness never sends at that point: bundle code writing on the
    command channel, since the harness's own messages follow the protocol."""

    def __init__(self, kind: str, rank: int, why: str) -> None:
        super().__init__(f"{kind} rank {rank} {why}")
        self.kind, self.rank, self.why = kind, rank, why


class Conversation:
    """What ranks may say in the middle of one command, before their reply.

    The default allows nothing. A command whose ranks ask questions (the timed loop asks,
    after each call, whether the judge checks that call's output) passes its own."""

    def answer(self, question: Reply) -> Any:
        raise ProtocolViolation(question.kind, question.rank, "asked a question out of turn")

    def check_reply(self, reply: Reply) -> None:
        """Raise ProtocolViolation for a reply that cannot have come at this point."""


class RankPool:
    """W processes of one kind ("judge" or "candidate"), rank r at index r."""

    def __init__(self, kind: str, world_size: int) -> None:
        self.kind = kind
        self.world_size = world_size
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.groups: list[int] = []  # process groups the ranks reported making

    def launch(self, ctx: Any, target: Callable[..., None], args: list[tuple[Any, ...]]) -> None:
        """Start one process per rank; `args[r]` follow the rank's end of its command pipe."""
        for rank in range(self.world_size):
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=target, args=(child_end, *args[rank]), name=f"pkb-{self.kind}-{rank}"
            )
            proc.start()
            child_end.close()
            self.procs.append(proc)
            self.conns.append(parent_end)

    def note_ready(self, replies: list[Reply]) -> None:
        for reply in replies:
            pid = reply.data.get("pid")
            if reply.kind == self.kind and pid == self.procs[reply.rank].pid:
                self.groups.append(int(pid))

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def send(self, op: str, step: int, payload: Any = None) -> None:
        for rank, conn in enumerate(self.conns):
            try:
                conn.send((op, step, payload))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                raise RankDied(self.kind, rank, how_it_ended(self.procs[rank])) from None

    def ask_to_stop(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("stop", -1, None))
            except OSError:
                pass

    def join(self, deadline: float) -> None:
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))

    def kill(self) -> None:
        for group in self.groups:
            _signal_group(group)
        for proc in self.procs:
            if proc.pid is not None and proc.pid not in self.groups and proc.is_alive():
                _signal_pid(proc.pid)
        for proc in self.procs:
            proc.join(KILL_VERIFY_S)
            if proc.is_alive():
                log.error("%s rank process %s survived SIGKILL", self.kind, proc.pid)
        survivors = wait_groups_empty(self.groups, KILL_VERIFY_S)
        if survivors:
            log.error("processes %s of %s ranks survived SIGKILL", survivors, self.kind)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns, self.groups = [], [], []


def gather(
    pools: list[RankPool],
    step: int,
    timeout_s: float,
    *,
    decisive: Callable[[Reply], bool] = lambda reply: False,
    conversation: Conversation | None = None,
) -> list[Reply]:
    """Wait for one reply per rank of `pools` to command `step`.

    A message with "ask" in it is a question, not the reply: `conversation` answers it on
    the rank's channel. Returns early, with the replies so far, when `decisive(reply)`
    says the rest no longer matters. Raises RankDied when a rank process ends, PoolTimeout
    at the deadline, ProtocolViolation for what no harness sends.
    """
    conversation = conversation or Conversation()
    owners = {conn: (pool, rank) for pool in pools for rank, conn in enumerate(pool.conns)}
    sentinels = {
        proc.sentinel: (pool, rank) for pool in pools for rank, proc in enumerate(pool.procs)
    }
    pending = dict(owners)
    replies: list[Reply] = []
    end = time.monotonic() + timeout_s
    while pending:
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise PoolTimeout(replies, sorted((p.kind, r) for p, r in pending.values()))
        for ready in wait([*pending, *sentinels], timeout=remaining):
            if ready in sentinels:
                pool, rank = sentinels[ready]
                raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank]))
            if ready not in pending:
                continue
            pool, rank = pending[ready]
            try:
                data = json.loads(ready.recv_bytes(MAX_REPLY_BYTES))
            except (EOFError, OSError, ValueError):
                raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank])) from None
            if not isinstance(data, dict) or data.get("step") != step:
                continue  # a stale or forged reply: not an answer to this command
            reply = Reply(pool.kind, rank, data)
            if "ask" in data:
                _answer(ready, step, conversation.answer(reply), pool, rank)
                continue
            conversation.check_reply(reply)
            replies.append(reply)
            del pending[ready]
            if decisive(reply):
                _raise_if_a_rank_died(pools, sentinels)
                return replies
    return replies


def _answer(conn: Connection, step: int, value: Any, pool: RankPool, rank: int) -> None:
    try:
        conn.send(("answer", step, value))
    except (BrokenPipeError, ConnectionResetError, EOFError):
        raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank])) from None


def _raise_if_a_rank_died(pools: list[RankPool], sentinels: dict[Any, Any]) -> None:
    for ready in wait(list(sentinels), timeout=DEATH_GRACE_S):
        pool, rank = sentinels[ready]
        raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank]))


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


def _signal_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_pid(pid: int) -> None:
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
        for pid, fields in sandbox.process_stats()
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
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
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
            _signal_group(group)
        time.sleep(0.05)


class EvaluationStopped(Exception):
    """The portal called the attempt off (cancelled, or superseded by a requeue): the
    evaluation ends without a result, since none would be recorded."""


# Stopping is asked from another thread (the one watching the portal's stop signal) while
# the evaluating thread waits on its ranks: that thread only kills the ranks' processes;
# the evaluating thread sees them die, learns why here, and cleans up as after any failure.
_stop_reason: list[str] = []
_stop_lock = threading.Lock()
_live_pools: weakref.WeakSet[RankPools] = weakref.WeakSet()


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


class EvaluatorError(RuntimeError):
    """The host cannot evaluate at all (no GPUs, ranks that never start): not the bundle's fault."""


class PoolStartError(EvaluatorError):
    """Rank processes did not come up."""


class RankPools:
    """The judge and candidate pools of one bundle.

    Started lazily. After a candidate failure only the candidate pool is restarted: judges
    finish every command whatever their candidate did (they run the reference even when
    it failed), so once the candidates are dead the judges come back to rest, which
    `candidate_failed` checks before keeping them. Anything wrong on the judge side
    restarts both.
    """

    def __init__(
        self,
        *,
        world_size: int,
        backend: str,
        scratch: Path,
        candidate_env: Mapping[str, str] | None = None,
        limits: sandbox.Limits | None = None,
        executable: str | None = None,
        protected: Collection[int] = (),
        identity: sandbox.Identity | None = None,
    ) -> None:
        """`executable` starts candidate processes (the sandbox launcher); `protected`
        are children of ours that the orphan sweep must spare (the jail's holder); `identity`
        is the user candidates run as (the launcher switches to it), owner of their logs."""
        self.world_size = world_size
        self.candidate_env = dict(candidate_env or {})
        self.limits = limits
        self.executable = executable
        self.protected = set(protected)
        self.identity = identity
        self.since_ticks = sandbox.now_ticks()
        self.backend = backend
        self.scratch = scratch
        self.logs = scratch / "logs"
        # Root's, not the candidates': they write only the files made for them here.
        self.logs.mkdir(exist_ok=True, mode=0o755)
        self.ctx = multiprocessing.get_context("spawn")
        self.judge = RankPool("judge", world_size)
        self.candidate = RankPool("candidate", world_size)
        self.generation = 0
        self.step = 0
        _live_pools.add(self)

    def log_path(self, rank: int) -> Path:
        return self.logs / f"candidate-{rank}.log"

    def ensure_started(self) -> None:
        raise_if_stopped()
        if not self.judge.procs:
            self.kill()
            self._start(judges=True)
        elif not self.candidate.procs:
            self._start(judges=False)

    def _start(self, *, judges: bool) -> None:
        self.generation += 1
        pipes = [self.ctx.Pipe(duplex=False) for _ in range(self.world_size)]
        try:
            if judges:
                self.judge.launch(
                    self.ctx,
                    judge_main,
                    [self._setup("judge", r, p[0]) for r, p in enumerate(pipes)],
                )
            else:
                self._rewire_judges([reader for reader, _ in pipes])
            candidates = [self._setup("candidate", r, p[1]) for r, p in enumerate(pipes)]
            for rank in range(self.world_size):
                sandbox.candidate_file(self.log_path(rank), self.identity)
            with sandbox.spawning_with(self.executable):
                self.candidate.launch(self.ctx, candidate_main, candidates)
        finally:
            for reader, writer in pipes:  # the ranks hold their own ends now
                reader.close()
                writer.close()
        pools = [self.judge, self.candidate] if judges else [self.candidate]
        try:
            replies = gather(pools, 0, POOL_START_TIMEOUT_S)
        except (RankDied, PoolTimeout) as exc:
            self.kill()
            raise_if_stopped()
            raise PoolStartError(f"rank processes did not start: {exc}") from exc
        for pool in pools:
            pool.note_ready(replies)
        log.info(
            "started %d %s ranks (%s)",
            self.world_size,
            "+".join(p.kind for p in pools),
            self.backend,
        )

    def _setup(self, kind: str, rank: int, peer: Connection) -> tuple[RankSetup]:
        setup = RankSetup(
            rank=rank,
            world_size=self.world_size,
            backend=self.backend,
            rendezvous=self._rendezvous(kind),
            peer=peer,
            threads=max(1, (os.cpu_count() or 1) // self.world_size),
            log_path=str(self.log_path(rank)) if kind == "candidate" else None,
            env=self.candidate_env if kind == "candidate" else {},
            limits=self.limits if kind == "candidate" else None,
        )
        return (setup,)

    def _rendezvous(self, kind: str) -> str:
        name = f"rendezvous-{kind}-{self.generation}"
        if kind == "judge":
            return str(self.scratch / name)
        # Candidates create theirs where they may write: their own TMPDIR.
        folder = Path(self.candidate_env.get("TMPDIR", self.scratch))
        return str(folder / name)

    def _rewire_judges(self, readers: list[Connection]) -> None:
        self.step += 1
        try:
            for rank, (conn, reader) in enumerate(zip(self.judge.conns, readers, strict=True)):
                conn.send(("rewire", self.step, None))
                reduction.send_handle(conn, reader.fileno(), self.judge.procs[rank].pid)
            gather([self.judge], self.step, SETTLE_S, decisive=_is_error)
        except (OSError, RankDied, PoolTimeout) as exc:
            self.kill()
            raise_if_stopped()
            raise PoolStartError(f"judge ranks did not take the new pipes: {exc}") from exc

    def command(
        self,
        *,
        judge: tuple[str, Any] | None = None,
        candidate: tuple[str, Any] | None = None,
        timeout_s: float,
        conversation: Conversation | None = None,
    ) -> list[Reply]:
        """Send one command to every rank of the named pools and wait for all the answers.

        An error from any rank ends the wait at once: its peers are likely stuck inside a
        collective, so waiting for the deadline would only waste it.
        """
        raise_if_stopped()
        self.step += 1
        pools = []
        try:
            for pool, order in ((self.judge, judge), (self.candidate, candidate)):
                if order is not None:
                    pool.send(order[0], self.step, order[1])
                    pools.append(pool)
            return gather(
                pools, self.step, timeout_s, decisive=_is_error, conversation=conversation
            )
        except (RankDied, PoolTimeout, ProtocolViolation):
            raise_if_stopped()  # ranks killed by a stop are not the bundle's failure
            raise

    def sweep_orphans(self) -> list[int]:
        """Kill what bundle code detached from its process group (the evaluating process
        is a subreaper, so such orphans are its children): everything started since this
        pool that is not a rank, the jail or multiprocessing's resource tracker."""
        keep = {*self.judge.pids, *self.candidate.pids, *self.protected, *_tracker_pid()}
        killed = sandbox.reap_orphans(since_ticks=self.since_ticks, keep=keep)
        if killed:
            log.warning("killed %d processes that bundle code left behind", len(killed))
        return killed

    def candidate_failed(self) -> None:
        """Kill the candidate ranks at once; keep the judges only if they come to rest."""
        self.candidate.kill()
        self.sweep_orphans()
        if not self.judge.procs:
            return
        self.step += 1
        try:
            # Commands run in order: the answer to this comes after the judge's last one.
            self.judge.send("ping", self.step)
            replies = gather([self.judge], self.step, SETTLE_S, decisive=_is_error)
        except (RankDied, PoolTimeout):
            replies = []
        if len(replies) != self.world_size or any(_is_error(r) for r in replies):
            log.warning("judge ranks did not come to rest after a candidate failure; restarting")
            self.judge.kill()

    def kill(self) -> None:
        self.candidate.kill()
        self.judge.kill()
        self.sweep_orphans()

    def kill_processes(self) -> None:
        """SIGKILL every rank and what it started, from any thread: it only signals, and
        leaves the pipes and records to the evaluating thread's `kill` or `stop`."""
        for pool in (self.candidate, self.judge):
            groups = list(pool.groups)
            for group in groups:
                _signal_group(group)
            for pid in pool.pids:
                if pid not in groups:
                    _signal_pid(pid)

    def stop(self, *, grace_s: float = 5.0) -> None:
        """Ask every rank to leave, then kill what is left, grandchildren included."""
        pools = (self.candidate, self.judge)
        for pool in pools:
            pool.ask_to_stop()
        deadline = time.monotonic() + grace_s
        for pool in pools:
            pool.join(deadline)
            pool.kill()
        self.sweep_orphans()

    def log_marks(self) -> list[int]:
        return [_size(self.log_path(rank)) for rank in range(self.world_size)]

    def logs_since(self, marks: list[int]) -> str:
        parts = []
        for rank, mark in enumerate(marks):
            text = read_log(self.log_path(rank), mark)
            if text.strip():
                parts.append(f"--- rank {rank} ---\n{text.rstrip()}\n")
        return cap_log("".join(parts))


def _tracker_pid() -> list[int]:
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return [pid] if pid else []


def _is_error(reply: Reply) -> bool:
    return not reply.data.get("ok", False)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_log(path: Path, offset: int, limit: int = 64 * 1024) -> str:
    """What a log gained after `offset`; only its head and tail when that is long."""
    size = _size(path)
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
