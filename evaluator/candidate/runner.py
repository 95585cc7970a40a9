"""A runner rank: call a function on what the judge wrote into the arena, copy back what it
returns. The candidate's runner calls the bundle's `solution`; the reference's runner, a
process that never imports bundle code, calls the problem's reference with the same code,
so both sides of a speedup pay for the same harness.

Two pipes: `control` to the evaluator (start, load, stop) and the judge's (arenas and
rounds). Commands come in as pickles from the trusted side; replies go out as JSON bytes,
which the judge validates before it believes a word. A round is two commands:

    prepare: the calls' arguments as views of the arena (before the judge's start stamp;
             the judge writes no input before it);
    go:      the calls one at a time. The judge writes call k's inputs, then rings (the
             "go" itself for the first call); the runner calls, copies the output into
             the call's room, synchronises the device (GPU: every stream) and says what
             went into the room. Only then does the judge copy the room out and write call
             k+1's inputs. So no call can read a later call's inputs (they do not exist
             yet), and no output can be finished once they do: a call is answered from
             what it and the calls before it were given, never from later ones
             (docs/security.md, "What a candidate sees").

Nothing here is timed or checked: the judge stamps its clock before it writes the inputs
and after it has copied the outputs it checks, and holds what the candidate says it
returned against what the reference returned (docs/security.md).
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from collections.abc import Callable
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch

from evaluator import rank_process
from evaluator.candidate import arena, profiler
from evaluator.candidate.watch import tampering, watch
from evaluator.rank_process import RankSetup, describe, reply

# How long a runner polls for the judge's "go" after a "prepare" before it blocks.
SPIN_S = 0.02


def reference_main(control: Connection, setup: RankSetup) -> None:
    _Runner(control, setup, untrusted=False).serve()


def candidate_main(control: Connection, setup: RankSetup) -> None:
    _Runner(control, setup, untrusted=True).serve()


class _Runner:
    def __init__(self, control: Connection, setup: RankSetup, *, untrusted: bool) -> None:
        self.control, self.judge = control, setup.peers[0]
        self.device = rank_process.start(setup, untrusted=untrusted)
        self.spin_s = SPIN_S if self.device.type == "cuda" else 0.0
        self.fn: Callable[..., Any] | None = None
        self.base: torch.Tensor | None = None
        self.mapped: Any = None  # the arena's mapping (an mmap, or a vmm.Mapping)
        # The prepared round: per call, the function, its arguments and its output room.
        self.pending: list[tuple[Callable[..., Any], dict[str, Any], int, int]] = []
        self.placed: dict[tuple[int, int], _Placed] = {}  # by room: what last went there
        self.profiling: profiler.Session | None = None  # a profile run's round only
        # Python's cyclic collector is off from a round's "prepare" to the reply to its
        # "go", in both runners alike, and back on after: a collection inside the
        # judge's clock adds its pause to whichever round it falls in, as the judge's
        # own did (judge/link.py, `collector_paused`). Bundle code may turn it on again
        # in its own process: its own rounds then pay for it.
        self.collector = False

    def serve(self) -> None:
        # The copy kernel loads now, not in the first round the judge times.
        torch.zeros(4, device=self.device).copy_(torch.ones(4, device=self.device))
        reply(self.control, {"step": 0, "ok": True, "pid": os.getpid(), "pgid": os.getpgid(0)})
        while True:
            for ready in wait([self.control, self.judge]):
                conn = self.control if ready is self.control else self.judge
                try:
                    op, step, payload = conn.recv()
                except (EOFError, OSError):
                    return  # the evaluator or the judge is gone
                if op == "stop":
                    return
                if op == "prepare":
                    self.collector = self.collector or gc.isenabled()
                    gc.disable()
                answer = self.handle(op, payload, conn, step)
                rank_process.flush()
                reply(conn, {"step": step, **answer})
                if op == "prepare":  # the judge's "go" follows at once: no wake-up in it
                    rank_process.wait_readable(conn, self.spin_s)
                elif self.collector:
                    self.collector = False
                    gc.enable()

    def handle(self, op: str, payload: Any, conn: Connection, step: int = 0) -> dict[str, Any]:
        try:
            if op == "load":
                return self.load(payload)
            if op == "arena":
                return self.map(payload, conn)
            if op == "prepare":
                return self.prepare(payload["calls"])
            if op == "go":
                return self.go(step)
            if op == "profile":
                return profiler.start(self, payload["trace"])
            if op == "profile-end":
                return profiler.finish(self)
            raise ValueError(f"unknown command {op!r}")
        except BaseException as exc:  # SystemExit from a solution is its failure, not ours
            traceback.print_exc()
            return {
                "ok": False,
                "phase": "import" if op == "load" else "run",
                "error": describe(exc),
                "traceback": traceback.format_exc(),
            }

    def load(self, payload: dict[str, Any]) -> dict[str, Any]:
        if "problem" in payload:
            self.fn = payload["problem"].reference
        else:
            self.fn = rank_process.import_solution(Path(payload["path"]), payload["module"])
        return {"ok": True}

    def map(self, export: dict[str, Any], conn: Connection) -> dict[str, Any]:
        fd = reduction.recv_handle(conn)
        old, self.base, self.pending, self.placed = self.mapped, None, [], {}
        if hasattr(old, "release"):  # a GPU arena the judge replaced (a CPU one just goes)
            old.release()
        if export["kind"] == "cpu":
            self.base, self.mapped = arena.open_cpu(fd, export["size"])
        else:
            self.mapped = arena.open_cuda(fd, export["size"], self.device.index or 0)
            self.base = self.mapped.base
        return {"ok": True}

    def prepare(self, calls: list[dict[str, Any]]) -> dict[str, Any]:
        """The next round's arguments, as views of the arena the judge has not written yet:
        before the judge's start stamp, so that building them is no part of a call.

        A call with "echo" returns those slots of the arena instead of calling anything:
        the judge times the harness alone that way on the reference's runner (a tare), and
        ends the candidate's side with the same round, untimed (judge/rank.py)."""
        if self.fn is None or self.base is None:
            raise RuntimeError("a round before the load and the arena")
        base, fn = self.base, self.fn
        self.pending = [
            (
                _echo(base, c["echo"]) if "echo" in c else fn,
                arena.call_inputs(base, c["inputs"]),
                *c["room"],
            )
            for c in calls
        ]
        return {"ok": True}

    def go(self, step: int) -> dict[str, Any]:
        """The prepared calls, each once the judge has written its inputs (`_rung`), each
        output copied into its room and the device synchronised before the judge hears
        what it was: the judge copies the room out before it writes the next call's
        inputs, so work still running after the report could only spoil this call's
        answer, never see the next call's inputs."""
        base, pending, self.pending, placed = self.base, self.pending, [], self.placed
        assert base is not None
        for call, (fn, kwargs, offset, room) in enumerate(pending):
            if call:
                self._rung(call)
            out = fn(**kwargs)
            entry = _again(placed, (offset, room), out) or _place_new(
                placed, base, out, offset, room
            )
            if self.device.type == "cuda":
                # Every stream of the device: work a solution left on a side stream counts.
                torch.cuda.synchronize(self.device)
            reply(self.judge, {"step": step, "call": call, "entry": entry})
        return {"ok": True, "tampered": tampering()}

    def _rung(self, call: int) -> None:
        """Wait for the judge's word that call `call`'s inputs are in the arena."""
        rank_process.wait_readable(self.judge, self.spin_s)
        if self.judge.recv_bytes(16) != b"%d" % call:
            raise RuntimeError(f"the judge's doorbell out of turn before call {call}")


def _echo(base: torch.Tensor, echo: list[Any]) -> Callable[..., Any]:
    kind, slots = echo
    views = [arena.view(base, arena.Slot.from_json(s, limit=base.numel())) for s in slots]
    value = views[0] if kind == "tensor" else tuple(views) if kind == "tuple" else views

    def call(**kwargs: Any) -> Any:
        return value

    return call


class _Placed:
    """A room's last plain tensor output: its views, and the reply entry it gave."""

    def __init__(self, out: torch.Tensor, view: torch.Tensor, entry: dict[str, Any]) -> None:
        self.type, self.shape, self.dtype, self.device = type(out), out.shape, out.dtype, out.device
        self.layout, self.view, self.entry = out.layout, view, entry


def _again(placed: dict[tuple[int, int], _Placed], room: tuple[int, int], out: Any) -> Any:
    """The quick path: a plain tensor like the last one that went into this room is copied
    into the same view (the slow path, `place`, would compute the same slot); None else.
    Both runners take it alike, so it costs the reference what it costs the candidate."""
    last = placed.get(room)
    if (
        last is None
        or type(out) is not last.type
        or out.shape != last.shape
        or out.dtype != last.dtype
        or out.device != last.device
        or out.layout != last.layout
    ):
        return None
    last.view.copy_(out)
    return last.entry


def _place_new(
    placed: dict[tuple[int, int], _Placed], base: torch.Tensor, out: Any, offset: int, room: int
) -> dict[str, Any]:
    entry = place(base, out, offset, room)
    if type(out) is torch.Tensor and set(entry) == {"kind", "items"}:
        slot = arena.pack(entry["items"], offset)[0][0]
        placed[(offset, room)] = _Placed(out, arena.view(base, slot), entry)
    return entry


def place(base: torch.Tensor, out: Any, offset: int, room: int) -> dict[str, Any]:
    """Copy an output into its room; what it was (the judge holds it against the
    reference's), or why it could not go there."""
    found = arena.describe(out)
    if found is None:
        return {"foreign": type(out).__name__}
    kind, items = found
    slots, end = arena.pack(items, offset)
    if end > offset + room:
        return {"kind": kind, "items": items, "need": end - offset}
    tensors = [out] if kind == "tensor" else out
    for tensor, slot in zip(tensors, slots, strict=True):
        if tensor.device != base.device:
            return {"kind": kind, "items": items, "device": str(tensor.device)}
        arena.view(base, slot).copy_(tensor)
    return {"kind": kind, "items": items}


# The runner itself: a solution that swaps these is flagged (a tripwire, see watch.py).
for _name in ("serve", "handle", "prepare", "go", "_rung", "map"):
    watch(_Runner, _name)
for _owner, _name in (
    (Connection, "send_bytes"),
    (Connection, "recv"),
    (arena, "view"),
    (arena, "describe"),
    (sys.modules[__name__], "place"),
    (sys.modules[__name__], "_again"),
    (rank_process, "reply"),
):
    watch(_owner, _name)
