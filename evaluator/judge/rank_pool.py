"""A pool of rank processes of one kind, and waiting for their replies.

The parent sends commands as pickles (it is the trusted side) and reads replies as JSON
bytes only, so no rank can smuggle a pickle into the process that holds the seed secret.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from evaluator.host import proctree
from evaluator.judge.processes import (
    DEATH_GRACE_S,
    KILL_VERIFY_S,
    how_it_ended,
    signal_group,
    signal_pid,
    wait_groups_empty,
)

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 4 * 1024 * 1024


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


class RankPool:
    """W processes of one kind ("judge", "reference" or "candidate"), rank r at index r."""

    def __init__(self, kind: str, world_size: int) -> None:
        self.kind = kind
        self.world_size = world_size
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.groups: list[int] = []  # process groups the ranks reported making
        # Thaws the ranks' freezer cgroups (the runners' pools, where the host has them): on
        # cgroup v1 a frozen process dies of SIGKILL only once thawed.
        self.thaw: Callable[[], None] = lambda: None

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
        """Each started rank's process group: its own pid, as the host sees it (a rank in
        the candidate's sandbox is its launcher's child there, and says another pid)."""
        for reply in replies:
            if reply.kind == self.kind and isinstance(reply.data.get("pid"), int):
                self.groups.append(self.rank_pid(reply.rank))

    def rank_pid(self, rank: int) -> int:
        launched = self.procs[rank].pid
        return proctree.rank_pid(launched) if launched is not None else -1

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
        self.thaw()
        for group in self.groups:
            signal_group(group)
        for proc in self.procs:
            if proc.pid is not None and proc.pid not in self.groups and proc.is_alive():
                signal_pid(proc.pid)
        self.thaw()  # again: a judge may have frozen its rank meanwhile
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
    watched: list[RankPool] = (),  # type: ignore[assignment]
) -> list[Reply]:
    """Wait for one reply per rank of `pools` to command `step`.

    Returns early, with the replies so far, when `decisive(reply)`
    says the rest no longer matters. Raises RankDied when a rank process ends, PoolTimeout
    at the deadline.
    """
    owners = {conn: (pool, rank) for pool in pools for rank, conn in enumerate(pool.conns)}
    # A rank of a watched pool (the runners a judge drives) that dies ends the wait too.
    sentinels = {
        proc.sentinel: (pool, rank)
        for pool in [*pools, *watched]
        for rank, proc in enumerate(pool.procs)
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
            replies.append(Reply(pool.kind, rank, data))
            del pending[ready]
            if decisive(replies[-1]):
                return replies + _within_grace(pending, sentinels, step)
    return replies


def _within_grace(
    pending: dict[Connection, tuple[RankPool, int]], sentinels: dict[Any, Any], step: int
) -> list[Reply]:
    """After a decisive reply: what the other ranks say within DEATH_GRACE_S (ranks that
    fail together are all named), or the death of one (a crash is the real story)."""
    late: list[Reply] = []
    end = time.monotonic() + DEATH_GRACE_S
    while (remaining := end - time.monotonic()) > 0:
        ready_now = wait([*pending, *sentinels], timeout=remaining)
        if not ready_now:
            break
        for ready in ready_now:
            if ready in sentinels:
                pool, rank = sentinels[ready]
                raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank]))
            conn = next(c for c in pending if c is ready)
            pool, rank = pending.pop(conn)
            try:
                data = json.loads(conn.recv_bytes(MAX_REPLY_BYTES))
            except (EOFError, OSError, ValueError):
                raise RankDied(pool.kind, rank, how_it_ended(pool.procs[rank])) from None
            if isinstance(data, dict) and data.get("step") == step:
                late.append(Reply(pool.kind, rank, data))
    return late
