"""A judge's side of one runner: the pipe, the arena the judge owns, and its clock (with
the collector paused while it runs).

The arena is memory only this judge and this runner see, passed as a file descriptor over
their pipe (SCM_RIGHTS: no name anyone else could open, across users and namespaces):
- CPU: a memfd the judge maps;
- GPU: a physical allocation of its own (`evaluator.candidate.vmm`), so the runner's
  mapping reaches its arena and nothing else of the judge's: no reference output, no
  input of another call.
The two processes' work is ordered by the CPU, call by call: the judge synchronises its
stream (the outputs it copied out, then the next call's inputs) before it rings; the runner
synchronises its device before it reports a call. A runner that reports early gains
nothing: the judge's copy of the call's room reads it after the report and before the next
call's inputs exist, so whatever the copy found was written by then.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
from collections.abc import Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from evaluator.candidate import vmm
from evaluator.candidate.arena import CpuMapping
from evaluator.rank_process import wait_readable

MAX_REPLY_BYTES = 1024 * 1024
MIN_ARENA_BYTES = 1 << 20


class RunnerGone(Exception):
    """The runner died, closed its pipe, or wrote what no runner of ours writes."""

    def __init__(self, how: str, *, protocol: bool = False) -> None:
        super().__init__(how)
        self.how, self.protocol = how, protocol


class RunnerLink:
    def __init__(self, conn: Connection, device: torch.device) -> None:
        self.conn, self.device = conn, device
        self.cuda = device.type == "cuda"
        self.base: torch.Tensor | None = None
        self.memory: Any = None  # the memfd (CPU) or the vmm.Mapping (GPU) behind `base`
        self.exported = False
        self.seq = 0

    def replace(self, conn: Connection) -> None:
        """A restarted runner: its arena must be handed over again."""
        self.conn.close()
        self.conn, self.exported = conn, False

    @property
    def size(self) -> int:
        return 0 if self.base is None else self.base.numel()

    def ensure(self, nbytes: int) -> torch.Tensor:
        """The arena, at least `nbytes` large, mapped by the runner."""
        if self.size < nbytes:
            self._allocate(max(nbytes, 2 * self.size, MIN_ARENA_BYTES))
        elif not self.exported and not self.cuda and self.memory is None:
            self._allocate(self.size)  # a new runner: its memfd was closed at the export
        if not self.exported:
            self._export()
        assert self.base is not None
        return self.base

    def _allocate(self, nbytes: int) -> None:
        self.base, self.exported = None, False
        if self.cuda:
            if self.memory is not None:
                self.memory.release()
            self.memory = vmm.create(nbytes, self.device.index or 0)
            self.base = self.memory.base
            return
        if self.memory is not None:
            os.close(self.memory)
        self.memory = os.memfd_create("pkb-arena", os.MFD_CLOEXEC)
        os.ftruncate(self.memory, nbytes)
        mapping = CpuMapping(self.memory, nbytes)  # holds no descriptor (arena.py)
        self.base = torch.frombuffer(mapping.buffer, dtype=torch.uint8)

    def _export(self) -> None:
        """The arena to the runner. A CPU arena's memfd is closed once sent: the judge
        keeps its mapping only, so no descriptor of it is left in the judge for bundle
        code to reopen through /proc/<pid>/fd (a red team did, on a test host, and read
        the other rank's inputs: tests/redteam/test_review_attacks.py)."""
        kind = "cuda" if self.cuda else "cpu"
        fd = self.memory.export() if self.cuda else self.memory
        if not self.cuda:
            self.memory = None
        try:
            answer = self.command("arena", {"kind": kind, "size": self.size}, fd=fd)
        finally:
            os.close(fd)
        if not answer.get("ok"):
            raise RunnerGone(f"could not map its arena: {str(answer.get('error'))[:300]}")
        self.exported = True

    def command(
        self, op: str, payload: Any, *, fd: int = -1, spin_s: float = 0.0
    ) -> dict[str, Any]:
        """Send one command; its reply, as data (RunnerGone for anything else). With
        `spin_s`, the reply is polled for that long before blocking (rank_process)."""
        self.send(op, payload, fd=fd)
        return self.receive(spin_s)

    def send(self, op: str, payload: Any, *, fd: int = -1) -> None:
        self.seq += 1
        try:
            self.conn.send((op, self.seq, payload))
            if fd >= 0:
                reduction.send_handle(self.conn, fd, os.getpid())
        except OSError as exc:
            raise RunnerGone(f"could not be reached ({exc})") from None

    def ring(self, call: int) -> None:
        """Call `call`'s inputs are in the arena: the runner may make it."""
        try:
            self.conn.send_bytes(b"%d" % call)
        except OSError as exc:
            raise RunnerGone(f"could not be reached ({exc})") from None

    def call_report(self, call: int, spin_s: float = 0.0) -> dict[str, Any]:
        """What the runner says call `call` returned (its failure raises RunnerFailed
        in the caller: the reply then has no call)."""
        data = self.receive(spin_s)
        if "call" not in data and data.get("ok") is not True:
            return data  # the runner's failure, which `ok` raises
        entry = data.get("entry")
        if "call" not in data:
            raise RunnerGone("replied with a round's reply for a call's", protocol=True)
        if data["call"] != call or not isinstance(entry, dict):
            raise RunnerGone(f"reported out of turn: call {str(data['call'])[:20]}", protocol=True)
        return {"ok": True, "entry": entry}

    def receive(self, spin_s: float = 0.0) -> dict[str, Any]:
        try:
            if spin_s:
                wait_readable(self.conn, spin_s)
            raw = self.conn.recv_bytes(MAX_REPLY_BYTES)
        except EOFError:
            raise RunnerGone("closed its connection") from None
        except OSError as exc:  # a message over the limit: the pipe is out of step for good
            raise RunnerGone(f"wrote an oversized reply ({exc})", protocol=True) from None
        try:
            data = json.loads(raw)
        except ValueError:
            raise RunnerGone("wrote a reply that is not JSON", protocol=True) from None
        if not isinstance(data, dict) or data.get("step") != self.seq:
            raise RunnerGone(f"replied out of turn: {raw[:80]!r}", protocol=True)
        return data

    def inputs_written(self) -> None:
        if self.cuda:
            torch.cuda.current_stream(self.device).synchronize()


class Clock:
    """The judge's own timeline: CUDA events on its stream, or its process's clock.

    `start` after the judges' barrier and before the inputs exist in any runner's reach;
    `stop` after the judge has copied the outputs it checks. On a GPU the stop stamp
    follows the copy on the judge's stream, so every write the copy read happened before
    it, in whichever process, on whichever stream."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        if self.cuda:
            self.t0 = torch.cuda.Event(enable_timing=True)
            self.t1 = torch.cuda.Event(enable_timing=True)
            self.flag = torch.zeros(1, device=device)
        self.began = 0.0

    def barrier(self) -> None:
        # On GPUs a one-element all-reduce on the judge's stream: every rank's start stamp
        # then fires when the last judge arrives, in GPU time.
        if self.cuda:
            dist.all_reduce(self.flag)
        else:
            dist.barrier()

    def meet(self) -> None:
        """Wait, on the host, until every judge has come here: past it no rank's side of a
        pair is still being timed."""
        if self.cuda:
            dist.all_reduce(self.flag)
            torch.cuda.current_stream(self.device).synchronize()
        else:
            dist.barrier()

    def start(self) -> None:
        if self.cuda:
            self.t0.record()
        else:
            self.began = time.perf_counter()

    def stop(self) -> float:
        if not self.cuda:
            return time.perf_counter() - self.began
        self.t1.record()
        self.t1.synchronize()
        return self.t0.elapsed_time(self.t1) / 1e3


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a pair: a collection inside a judge's
    clock (the reply's JSON is parsed and the checked outputs read before the stop stamp)
    adds its pause to whichever round it falls in. The judge's allocations differ by
    side and order, so the pauses did too: with the collector on, the reference read
    2.5-4.7 us a call slower when it went second on one H100 at 64K and 1M (2026-11-26,
    docs/measurements/2026-11-26-order-effect.md); paused, within 1.5 us. What a pair
    leaves is collected after it, between commands."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
