"""Pools of rank processes: start them, talk to them, and kill them for certain.

The parent sends commands as pickles (it is the trusted side) and reads replies as JSON
bytes only, so a candidate process cannot smuggle a pickle into the process that holds the
seed secret. Every rank puts itself in its own process group first thing, so that killing
the group also kills whatever the rank started.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evaluator.candidate.runner import candidate_main, reference_main
from evaluator.contract import cap_log
from evaluator.host import cgroups, cleanup, rlimits, sandbox
from evaluator.host.reference_box import ReferenceBox
from evaluator.judge import stopping
from evaluator.judge.processes import (
    live_members,
    read_log,
    signal_group,
    signal_pid,
    size_of,
)
from evaluator.judge.rank import judge_main
from evaluator.judge.rank_pool import PoolTimeout, RankDied, RankPool, Reply, gather
from evaluator.rank_process import RankSetup, cores_for

log = logging.getLogger(__name__)

POOL_START_TIMEOUT_S = 180.0
# Judges only finish the reference of the command they were on; they need no deadline of
# the candidate's size to come to rest.
SETTLE_S = 60.0


class EvaluatorError(RuntimeError):
    """The host cannot evaluate at all (no GPUs, ranks that never start): not the bundle's fault."""


class SandboxFault(EvaluatorError):
    """This host cannot confine bundle code as its settings require: its fault alone."""


class PoolStartError(EvaluatorError):
    """Rank processes did not come up."""


class RankPools:
    """The three pools of one bundle: judges, the reference's runners, the candidate's.

    Started lazily. After a candidate failure only the candidate pool is restarted: judges
    finish every command whatever their candidate did (a dead runner is an answer), so once
    the candidates are dead the judges come back to rest, which `candidate_failed` checks
    before keeping them. Anything wrong on the trusted side restarts all three.
    """

    def __init__(
        self,
        *,
        world_size: int,
        backend: str,
        scratch: Path,
        candidate_env: Mapping[str, str] | None = None,
        limits: rlimits.Limits | None = None,
        executable: str | None = None,
        protected: Collection[int] = (),
        identity: sandbox.Identity | None = None,
        strays: Callable[[set[int]], list[int]] | None = None,
        reference_box: ReferenceBox | None = None,
        freezers: cgroups.Freezers | None = None,
    ) -> None:
        """`executable` starts candidate processes (the sandbox launcher); `protected`
        are children of ours that the orphan sweep must spare (the jail's holder); `identity`
        is the user candidates run as (the launcher switches to it), owner of their logs;
        `reference_box` starts the reference's runners as the candidates start;
        `freezers` take each runner's rank's processes as it starts, for its judge to
        freeze while the other runner is timed."""
        self.world_size = world_size
        self.candidate_env = dict(candidate_env or {})
        self.limits = limits
        self.executable = executable
        self.protected = set(protected)
        self.reference_box = reference_box
        self.freezers = freezers
        if reference_box is not None:
            self.protected.add(reference_box.holder)
        # Kills what is left in the candidate's sandbox but the given ranks (bubblewrap's
        # Sandbox.kill_strays): orphans there are not ours to reap.
        self.strays = strays
        self.identity = identity
        self.since_ticks = cleanup.now_ticks()
        self.backend = backend
        self.scratch = scratch
        self.logs = scratch / "logs"
        # Root's, not the candidates': they write only the files made for them here.
        self.logs.mkdir(exist_ok=True, mode=0o755)
        # Candidates start through the sandbox launcher (spawn, a fresh interpreter); the
        # judges (and on CPU hosts the reference's runners) fork from a server that
        # imported torch once (judge/preload.py).
        self.ctx = multiprocessing.get_context("spawn")
        self.trusted_ctx = _trusted_context()
        self.judge = RankPool("judge", world_size)
        self.reference = RankPool("reference", world_size)
        self.candidate = RankPool("candidate", world_size)
        if freezers is not None:
            self.reference.thaw = functools.partial(freezers.thaw, "reference")
            self.candidate.thaw = functools.partial(freezers.thaw, "candidate")
        self.generation = 0
        self.step = 0
        self.starts_s: list[float] = []  # each start of the pools (all three, or candidates)
        stopping.register(self)

    @property
    def all(self) -> tuple[RankPool, RankPool, RankPool]:
        return (self.candidate, self.reference, self.judge)

    def log_path(self, rank: int) -> Path:
        return self.logs / f"candidate-{rank}.log"

    def warm_up(self) -> None:
        """Start the server the judges fork from now, so that its imports (torch, the
        catalog: seconds on a CPU host) overlap the compile pass. It is trusted code only
        and outside the sandbox, as when the first pool start makes it (issue 46)."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def ensure_started(self) -> None:
        stopping.raise_if_stopped()
        began = time.monotonic()
        if not self.judge.procs:
            self.kill()
            self._start(trusted=True)
        elif not self.candidate.procs:
            self._start(trusted=False)
        else:
            return
        # What `python -m evaluator.tools.turnaround` shows as pool start (issue 46).
        self.starts_s.append(round(time.monotonic() - began, 3))

    def _start(self, *, trusted: bool) -> None:
        """Start the candidates, and with `trusted` the judges and the reference's runners
        first; each judge holds one end of a duplex pipe to each of its two runners."""
        self.generation += 1
        to_candidates = [self.ctx.Pipe(duplex=True) for _ in range(self.world_size)]
        to_references = [self.ctx.Pipe(duplex=True) for _ in range(self.world_size)]
        try:
            if trusted:
                judges = [(r[0], c[0]) for r, c in zip(to_references, to_candidates, strict=True)]
                trusted = self.trusted_ctx
                self.judge.launch(trusted, judge_main, self._setups("judge", judges))
                ends = [(r[1],) for r in to_references]
                self._launch_references(ends)
            else:
                self._rewire_judges([c[0] for c in to_candidates])
            for rank in range(self.world_size):
                sandbox.candidate_file(self.log_path(rank), self.identity)
            ends = [(c[1],) for c in to_candidates]
            with sandbox.spawning_with(self.executable):
                self.candidate.launch(self.ctx, candidate_main, self._setups("candidate", ends))
        finally:
            for pipe in [*to_candidates, *to_references]:  # the ranks hold their own ends now
                for end in pipe:
                    end.close()
        pools = list(self.all) if trusted else [self.candidate]
        try:
            replies = gather(pools, 0, POOL_START_TIMEOUT_S)
        except (RankDied, PoolTimeout) as exc:
            self.kill()
            stopping.raise_if_stopped()
            raise PoolStartError(f"rank processes did not start: {exc}") from exc
        for pool in pools:
            pool.note_ready(replies)
        self._into_freezers(pools)
        self._tell_judges()
        kinds = "+".join(p.kind for p in pools)
        log.info("started %d %s ranks (%s)", self.world_size, kinds, self.backend)

    def _launch_references(self, ends: list[tuple[Connection]]) -> None:
        """On GPUs the reference's runner starts as the candidate's does: in a sandbox of
        its own where the candidate's is bubblewrap's (`reference_box`), else exec'd by a
        launcher with the same scrubbed environment block. Forked from the judges' server,
        the same code read 1.04-1.10x against itself at 64K (docs/measurements/
        2026-11-26-h200x2.md); started plainly, 0.97 (2026-11-26-runners-alike.md): how a
        process starts moves launch-bound calls by several percent. CPU hosts keep the
        fork: their readings are wider than that, and a spawn costs a torch import."""
        setups, box = self._setups("reference", ends), self.reference_box
        if box is not None:
            setups = [(box.setup(setup, self.generation),) for (setup,) in setups]
            launcher = box.executable
        elif self.backend == "nccl":
            launcher = str(sandbox.launcher(self.scratch / "reference", None))
        else:
            self.reference.launch(self.trusted_ctx, reference_main, setups)
            return
        with sandbox.spawning_with(launcher):
            self.reference.launch(self.ctx, reference_main, setups)

    def _setups(self, kind: str, peers: Sequence[tuple[Connection, ...]]) -> list[tuple[RankSetup]]:
        candidate = kind == "candidate"
        return [
            (
                RankSetup(
                    rank=rank,
                    world_size=self.world_size,
                    backend=self.backend,
                    rendezvous=self._rendezvous(kind),
                    peers=peers[rank],
                    threads=self._threads(kind),
                    cores=cores_for(kind, rank, self.world_size, self.backend),
                    log_path=str(self.log_path(rank)) if candidate else None,
                    env=self.candidate_env if candidate else {},
                    limits=self.limits if candidate else None,
                    seccomp=self._filtered(kind),
                ),
            )
            for rank in range(self.world_size)
        ]

    def _filtered(self, kind: str) -> bool:
        """A reference's runner started plainly on a host whose candidates run in
        bubblewrap (`strays`) takes their seccomp filter (0.95-0.97 at 64K without, 0.97-0.98
        with: docs/measurements/2026-11-26-order-effect.md), not their limits: outside a
        namespace the cap on tasks counts every process of the worker's user."""
        return kind == "reference" and self.strays is not None and self.reference_box is None

    def _threads(self, kind: str) -> int:
        if cores_for(kind, 0, self.world_size, self.backend):
            return 1
        return max(1, (os.cpu_count() or 1) // self.world_size)

    def _rendezvous(self, kind: str) -> str:
        name = f"rendezvous-{kind}-{self.generation}"
        if kind != "candidate":
            return str(self.scratch / name)
        # Candidates create theirs where they may write: their own TMPDIR.
        folder = Path(self.candidate_env.get("TMPDIR", self.scratch))
        return str(folder / name)

    def _rewire_judges(self, ends: list[Connection]) -> None:
        self.step += 1
        try:
            for rank, (conn, end) in enumerate(zip(self.judge.conns, ends, strict=True)):
                conn.send(("rewire", self.step, None))
                reduction.send_handle(conn, end.fileno(), self.judge.procs[rank].pid)
            gather([self.judge], self.step, SETTLE_S, decisive=_is_error)
        except (OSError, RankDied, PoolTimeout) as exc:
            self.kill()
            stopping.raise_if_stopped()
            raise PoolStartError(f"judge ranks did not take the new pipes: {exc}") from exc

    def _into_freezers(self, started: list[RankPool]) -> None:
        """Each runner rank's processes, just started, into its rank's cgroup before any
        bundle code runs there (it is loaded later, by command): whatever they start
        stays inside."""
        if self.freezers is None:
            return
        for pool in started:
            if pool.kind in cgroups.RUNNERS:
                for rank in range(self.world_size):
                    group = pool.rank_pid(rank)
                    self.freezers.add(pool.kind, rank, live_members([group]) or [group])

    def _tell_judges(self) -> None:
        """Each judge learns its runners' process groups, as the host sees them, and their
        ranks' cgroups: it freezes each runner's rank while the other's rounds run
        (judge/turns.py)."""
        self.step += 1
        groups: dict[str, Any] = {
            f"{pool.kind}s": [pool.rank_pid(rank) for rank in range(self.world_size)]
            for pool in (self.reference, self.candidate)
        }
        if self.freezers is not None:
            groups["freezers"] = {
                runner: [str(path) for path in paths]
                for runner, paths in self.freezers.paths.items()
            }
        try:
            self.judge.send("runners", self.step, groups)
            gather([self.judge], self.step, SETTLE_S, decisive=_is_error)
        except (OSError, RankDied, PoolTimeout) as exc:
            self.kill()
            stopping.raise_if_stopped()
            raise PoolStartError(f"judge ranks did not take the candidates: {exc}") from exc

    def command(
        self,
        orders: Mapping[str, tuple[str, Any]],
        *,
        timeout_s: float,
    ) -> list[Reply]:
        """Send one command to every rank of the named pools ({"judge": (op, payload)}) and
        wait for all the answers, watching every pool for a death: a judge waiting on a
        runner that died answers late, the death says at once what happened.

        An error from any rank ends the wait at once: its peers are likely stuck inside a
        collective, so waiting for the deadline would only waste it.
        """
        stopping.raise_if_stopped()
        self.step += 1
        pools = [pool for pool in self.all if pool.kind in orders]
        try:
            for pool in pools:
                pool.send(orders[pool.kind][0], self.step, orders[pool.kind][1])
            others = [pool for pool in self.all if pool.kind not in orders]
            return gather(pools, self.step, timeout_s, decisive=_is_error, watched=others)
        except (RankDied, PoolTimeout):
            stopping.raise_if_stopped()  # ranks killed by a stop are not the bundle's failure
            raise

    def sweep_orphans(self) -> list[int]:
        """Kill what bundle code detached from its process group (the evaluating process
        is a subreaper, so such orphans are its children): everything started since this
        pool that is not a rank, the jail or multiprocessing's resource tracker."""
        keep = {*self.protected, *_tracker_pid()}
        for pool in self.all:
            keep.update(pool.pids)
        killed = cleanup.reap_orphans(since_ticks=self.since_ticks, keep=keep)
        if self.strays is not None:
            killed += self.strays(set(self.candidate.groups))
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
            self.kill()

    def kill(self) -> None:
        for pool in self.all:
            pool.kill()
        self.sweep_orphans()

    def kill_processes(self) -> None:
        """SIGKILL every rank and what it started, from any thread: it only signals, and
        leaves the pipes and records to the evaluating thread's `kill` or `stop`."""
        for pool in self.all:
            groups = list(pool.groups)
            for group in groups:
                signal_group(group)
            for pid in pool.pids:
                if pid not in groups:
                    signal_pid(pid)
            pool.thaw()  # a runner's frozen processes die only once thawed (cgroup v1)

    def stop(self, *, grace_s: float = 5.0) -> None:
        """Ask every rank to leave, then kill what is left, grandchildren included."""
        for pool in self.all:
            pool.thaw()  # a frozen rank could not hear the ask
        for pool in self.all:
            pool.ask_to_stop()
        deadline = time.monotonic() + grace_s
        for pool in self.all:
            pool.join(deadline)
            pool.kill()
        self.sweep_orphans()

    def log_marks(self) -> list[int]:
        return [size_of(self.log_path(rank)) for rank in range(self.world_size)]

    def logs_since(self, marks: list[int]) -> str:
        parts = []
        for rank, mark in enumerate(marks):
            text = read_log(self.log_path(rank), mark)
            if text.strip():
                parts.append(f"--- rank {rank} ---\n{text.rstrip()}\n")
        return cap_log("".join(parts))


def _trusted_context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["evaluator.judge.preload"])
    return ctx


def _tracker_pid() -> list[int]:
    """multiprocessing's resource tracker and forkserver: children of ours, not orphans."""
    from multiprocessing import forkserver, resource_tracker

    pids = [
        getattr(resource_tracker._resource_tracker, "_pid", None),
        getattr(forkserver._forkserver, "_forkserver_pid", None),
    ]
    return [pid for pid in pids if pid]


def _is_error(reply: Reply) -> bool:
    """A rank's error, or a judge reporting its candidate's failure: its peers are likely
    stuck in a collective the failed rank never joined."""
    return not reply.data.get("ok", False) or bool(reply.data.get("failure"))
