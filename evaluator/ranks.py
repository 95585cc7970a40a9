"""The main loops of the two kinds of rank process.

A JUDGE rank is trusted: it draws the inputs of a trial from the trial seed, runs the
problem's reference and compares the candidate's outputs with it. It never imports bundle
code, and it reads the candidate's outputs only through `torch.load(weights_only=True)`,
which builds tensors and plain containers and nothing else.

A CANDIDATE rank imports the bundle's `<slug>.py`, draws the same inputs from the same
seed, calls `solution(**inputs)` and sends the outputs to judge rank r over their pipe.
Its stdout and stderr (the file descriptors, so C-level output too) go to a log file.

Both answer their parent in JSON. Neither ever sees the seed secret.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import io
import json
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator import sandbox, timing
from evaluator.compare import ForeignValue, compare
from evaluator.timing import copy_output, digest, digest_values, run_batch, tampering
from problems.spec import Case, InputContext, Problem

MAX_HEADER_BYTES = 64 * 1024
MAX_OUTPUT_BYTES = 8 * 1024**3
# A candidate writing a runaway log (or any file) past this gets SIGXFSZ, not a full disk.
MAX_CANDIDATE_FILE_BYTES = 256 * 1024 * 1024
# The parent's per-problem deadline, not this, ends a hung collective.
COLLECTIVE_TIMEOUT = timedelta(hours=2)
_PR_SET_PDEATHSIG = 1
# Never NVLink multicast on shared hosts (see DESIGN.md), whatever the worker's environment.
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class RankSetup:
    rank: int
    world_size: int
    backend: str
    rendezvous: str  # path of the file:// rendezvous file, fresh for each pool start
    peer: Connection  # the judge's read end or the candidate's write end of their pipe
    threads: int
    log_path: str | None = None  # candidates only
    env: dict[str, str] = field(default_factory=dict)  # set before anything else runs
    limits: sandbox.Limits | None = None  # candidates only


def scrub_environment(extra: dict[str, str]) -> None:
    """Keep only the toolchain variables (sandbox.KEPT_*), then set `extra` (caches,
    scratch HOME and TMPDIR, multicast off). The initial environment block, what
    /proc/self/environ shows, is scrubbed by the sandbox launcher where it runs."""
    keep = sandbox.scrubbed(os.environ)
    for name in list(os.environ):
        if name not in keep:
            del os.environ[name]
    os.environ.update(extra)


def judge_main(conn: Connection, setup: RankSetup) -> None:
    _serve(conn, setup, _Judge)


def candidate_main(conn: Connection, setup: RankSetup) -> None:
    _serve(conn, setup, _Candidate)


def _serve(conn: Connection, setup: RankSetup, worker_class: type[_Worker]) -> None:
    os.setpgid(0, 0)  # first: from here on the parent can kill us and all we start
    die_with_parent()
    if worker_class is _Candidate:
        scrub_environment(setup.env)
    else:
        # Judges hold reference outputs: no /proc/<pid>/mem or environ for bundle code.
        sandbox.not_dumpable()
        os.environ.update(setup.env)
    if setup.log_path:
        confine_output(setup.log_path)
    torch.set_num_threads(setup.threads)
    device = _init_distributed(setup)
    if setup.limits is not None:
        for failure in sandbox.apply_limits(setup.limits, cuda=device.type == "cuda"):
            print(f"pkb sandbox: a limit could not be set: {failure}", file=sys.stderr)
    worker = worker_class(setup, device, conn)
    # The harness's own kernels load now, not in the first timed round of a fresh
    # process, where the parent's clock would count them against the candidate.
    digest_values([digest(copy_output(torch.zeros(4, device=device)))])
    worker.synchronize()
    _reply(conn, {"step": 0, "ok": True, "pid": os.getpid(), "pgid": os.getpgid(0)})
    while True:
        try:
            op, step, payload = conn.recv()
        except (EOFError, OSError):
            break  # the parent is gone
        if op == "stop":
            break
        worker.step = step
        if op == "rewire":
            # A restarted candidate pool: its pipe's read end comes over our socket.
            worker.peer.close()
            worker.peer = Connection(reduction.recv_handle(conn), writable=False)
            _reply(conn, {"step": step, "ok": True})
            continue
        reply = worker.handle(op, payload)
        flush()
        _reply(conn, {"step": step, **reply})
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


class _Worker:
    def __init__(self, setup: RankSetup, device: torch.device, conn: Connection) -> None:
        self.setup = setup
        self.peer = setup.peer
        self.device = device
        self.conn = conn  # to the parent
        self.step = 0  # of the command being carried out
        self.problem: Problem | None = None

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def inputs(self, case: Case, seed: int) -> dict[str, Any]:
        assert self.problem is not None
        ctx = InputContext(
            rank=self.setup.rank,
            world_size=self.setup.world_size,
            dtype=case.dtype,
            device=self.device,
            seed=seed,
        )
        return self.problem.make_inputs(case, ctx)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def timed_round(
        self, fn: Callable[..., Any], case: Case, seeds: list[int], warmup: int
    ) -> tuple[list[float], list[Any]]:
        """One round: `warmup` calls, then the others, each batch's inputs made before it;
        the times of every call, and copies of the outputs the parent says are checked.

        The timed calls' inputs are made only after the warm-up calls have run, so that no
        warm-up call (whose time is dropped) can see them and work ahead. The reference
        and the candidate both go through here, so the work between and around calls is
        the same for both."""
        times = self.batch(fn, case, seeds[:warmup], _Commitment(self, keep=False))
        timed = _Commitment(self)
        times += self.batch(fn, case, seeds[warmup:], timed)
        return times, timed.reveal()

    def batch(
        self, fn: Callable[..., Any], case: Case, seeds: list[int], commitment: _Commitment
    ) -> list[float]:
        inputs = [self.inputs(case, seed) for seed in seeds]
        return run_batch(fn, inputs, device=self.device, after_call=commitment.after_call)


class _Judge(_Worker):
    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            if op == "load":
                self.problem = payload["problem"]
                return {"ok": True}
            if op == "ping":
                return {"ok": True}
            if op == "probe":
                from evaluator.probe import measure_peer_bandwidth

                return {"ok": True, "bandwidth": measure_peer_bandwidth()}
            if op == "check":
                seeds = payload.get("seeds") or [payload["seed"]]
                return self._check(Case.from_json(payload["case"]), seeds)
            if op == "time":
                return self._time(payload)
            raise ValueError(f"unknown command {op!r}")
        except Exception as exc:
            traceback.print_exc()
            return {"ok": False, "error": describe(exc), "traceback": traceback.format_exc()}

    def _check(self, case: Case, seeds: list[int]) -> dict[str, Any]:
        """Compare the candidate's outputs for `seeds`, in that order, with the reference."""
        assert self.problem is not None
        # Receive first, then compute: the judge never competes with a running candidate.
        # The reference runs even when the candidate failed, so that every judge rank takes
        # part in the same collectives and the pool stays usable for the next problem.
        actuals: list[Any] = []
        for _ in seeds:
            actual = self._receive()
            if actual is None:
                break
            actuals.append(actual)
        worst: dict[str, Any] | None = None
        for k, seed in enumerate(seeds):
            expected = self.problem.reference(**self.inputs(case, seed))
            self.synchronize()
            if k >= len(actuals) or worst is not None and not worst["ok"]:
                continue
            verdict = compare(expected, actuals[k], self.problem.tolerance(case.dtype))
            found = {
                "ok": verdict.ok,
                "max_abs_err": verdict.max_abs_err,
                "max_rel_err": verdict.max_rel_err,
                "message": verdict.message,
                "output": k,
            }
            if (
                worst is None
                or not verdict.ok
                or _num(found["max_abs_err"]) > _num(worst["max_abs_err"])
            ):
                worst = found
        if len(actuals) < len(seeds):
            return {"ok": True, "skipped": True}
        # What the candidate shipped, reduced as its harness reduced the output of the call:
        # the parent holds the digest each call committed to before it knew it was checked.
        return {"ok": True, "verdict": worst, "digests": [_digest_of(a) for a in actuals]}

    def _receive(self) -> Any:
        """The candidate's outputs, or None when it failed before producing any."""
        try:
            header = json.loads(self.peer.recv_bytes(MAX_HEADER_BYTES))
            if not isinstance(header, dict) or not header.get("ok"):
                return None
            if header.get("kind") == "other":
                return ForeignValue(str(header.get("type", "?")))
            payload = self.peer.recv_bytes(MAX_OUTPUT_BYTES)
        except (EOFError, OSError, ValueError):
            return None  # the candidate died, or sent what no candidate of ours sends
        try:
            tensors = torch.load(io.BytesIO(payload), map_location=self.device, weights_only=True)
        except Exception:
            return ForeignValue("unreadable output")
        types = header.get("types")
        if not (
            isinstance(tensors, list)
            and isinstance(types, list)
            and len(tensors) == len(types)
            and all(isinstance(t, torch.Tensor) for t in tensors)
        ):
            return ForeignValue("malformed output")
        items = [
            t if kind == "Tensor" else ForeignValue(str(kind))
            for t, kind in zip(tensors, types, strict=True)
        ]
        return items[0] if header.get("kind") == "tensor" else tuple(items)

    def _time(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.problem is not None
        case, seeds = Case.from_json(payload["case"]), payload["seeds"]
        times, _ = self.timed_round(self.problem.reference, case, seeds, payload["warmup"])
        return {"ok": True, "times_us": times}


class _Candidate(_Worker):
    solution: Any = None

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        phase = "import" if op == "load" else "run"
        try:
            if op == "load":
                return self._load(payload)
            if op == "run":
                out = self._call(Case.from_json(payload["case"]), payload["seed"])
                self._ship(out)
                return {"ok": True}
            if op == "time":
                return self._time(payload)
            raise ValueError(f"unknown command {op!r}")
        except BaseException as exc:  # SystemExit from a solution is its failure, not ours
            traceback.print_exc()
            if op != "load":
                self._ship_failure()
            return {
                "ok": False,
                "phase": phase,
                "error": describe(exc),
                "traceback": traceback.format_exc(),
            }

    def _load(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.problem = payload["problem"]
        self.solution = import_solution(Path(payload["path"]), payload["module"])
        return {"ok": True}

    def _call(self, case: Case, seed: int) -> Any:
        inputs = self.inputs(case, seed)
        self._poison(2 * sum(_nbytes(v) for v in inputs.values()))
        out = self.solution(**inputs)
        self.synchronize()
        return out

    def _poison(self, nbytes: int) -> None:
        # The caching allocator hands a freed block to the next request that fits, on the
        # same stream: a solution's torch.empty(...) for its outputs likely lands in these
        # 0xFF bytes (NaN for floats, -1 for integers), so an element it never writes fails
        # the comparison instead of passing on a previous run's leftovers. Not on CPU,
        # where malloc gives no such reuse to count on. Poisoning is best effort: a GPU too
        # full for the block is no fault of the solution's.
        if self.device.type == "cuda" and nbytes:
            with contextlib.suppress(torch.OutOfMemoryError):
                torch.empty(nbytes, dtype=torch.uint8, device=self.device).fill_(0xFF)

    def _time(self, payload: dict[str, Any]) -> dict[str, Any]:
        case, seeds = Case.from_json(payload["case"]), payload["seeds"]
        before = tampering()
        times, checked = self.timed_round(self.solution, case, seeds, payload["warmup"])
        after = tampering()
        for out in checked:
            self._ship(out)
        return {"ok": True, "times_us": times, "tampered": sorted({*before, *after})}

    def _ship(self, out: Any) -> None:
        peer = self.peer
        if type(out) is torch.Tensor:
            kind, items = "tensor", [out]
        elif _plain_sequence(out):
            kind, items = "tuple", list(out)
        else:
            peer.send_bytes(_json({"ok": True, "kind": "other", "type": type(out).__name__}))
            return
        # Exact types: a subclass (of Tensor or of tuple) is shipped as its type name, never
        # read, since reading it could run bundle code that computes the answer then.
        types = ["Tensor" if type(x) is torch.Tensor else type(x).__name__ for x in items]
        # clone(): a view would otherwise ship its whole storage.
        tensors = [
            x.detach().cpu().clone() if type(x) is torch.Tensor else torch.empty(0) for x in items
        ]
        buf = io.BytesIO()
        torch.save(tensors, buf)
        peer.send_bytes(_json({"ok": True, "kind": kind, "types": types}))
        peer.send_bytes(buf.getvalue())

    def _ship_failure(self) -> None:
        with contextlib.suppress(OSError):
            self.peer.send_bytes(_json({"ok": False}))


class _Commitment:
    """Commit, then reveal: the outputs of one batch of calls, fixed before anyone knows
    which are checked.

    After call i returns, its output is copied on the device (a solution may reuse its
    output buffer in the next call), queued behind the call without waiting for it. After
    the batch every copy is reduced to a digest and the digests go to the parent in one
    message (`reveal`); only then does the parent say which of the calls the judge checks,
    and the copies of those are shipped and digested again by the judge. Bundle code that
    drives this protocol itself must commit to digests before it knows which calls count,
    so skipping the work of unchecked calls is caught as often as a wrong answer.

    The digests wait for the end of the batch, not for each call: between calls the GPU
    would otherwise idle while the CPU launches the digest's kernels, and the next call's
    start stamp would then count its own launch in full (docs/measurements/
    2026-11-23-h100-one-rank.md). Later is no weaker: bundle code able to rewrite the
    copies before they are digested could as well rewrite digests taken earlier, and
    either way the work it did after its calls is time the parent's clock sees."""

    def __init__(self, worker: _Worker, *, keep: bool = True) -> None:
        self.worker = worker
        self.keep = keep  # warm-up calls do the same copying, and keep nothing
        self.copies: list[Any] = []

    def after_call(self, index: int, out: Any) -> None:
        if not plain_output(out):
            # A tensor subclass could compute the right answer only when it is read.
            raise TypeError(
                f"a timed call returned {_type_name(out)}: outputs must be torch.Tensor "
                "objects or a tuple or list of them (tensor subclasses are not accepted)"
            )
        copy = copy_output(out)
        if self.keep:
            self.copies.append(copy)

    def commitments(self) -> list[list[int]]:
        """Every kept copy's digest, in call order: one batch of device work, one transfer."""
        return digest_values([digest(copy) for copy in self.copies])

    def reveal(self) -> list[Any]:
        """Send the commitments; the copies of the calls the parent then names."""
        worker = self.worker
        commitment = {"step": worker.step, "ask": "commit", "digests": self.commitments()}
        worker.conn.send_bytes(_json(commitment))
        message = worker.conn.recv()
        if not (
            isinstance(message, tuple)
            and message[:2] == ("answer", worker.step)
            and isinstance(message[2], list)
        ):
            raise RuntimeError("the harness expected the checked calls of its batch")
        return [self.copies[i] for i in message[2]]


def _digest_of(value: Any) -> list[int] | None:
    if not plain_output(value):
        return None  # a ForeignValue: no output of the harness, a wrong answer already
    return digest_values([digest(value)])[0]


# What torch.topk, torch.max(dim=...) and friends return: C tuples, taken at import, before
# bundle code runs (a class of its own could claim their module name).
_RETURN_TYPES = frozenset(
    t for t in vars(torch.return_types).values() if isinstance(t, type) and issubclass(t, tuple)
)


def _plain_sequence(value: Any) -> bool:
    return type(value) in (tuple, list) or type(value) in _RETURN_TYPES


def plain_output(out: Any) -> bool:
    """A Tensor, or a plain tuple or list of Tensors, and nothing that subclasses one."""
    if type(out) is torch.Tensor:
        return True
    return _plain_sequence(out) and all(type(x) is torch.Tensor for x in out)


def _type_name(out: Any) -> str:
    if _plain_sequence(out):
        return f"a {type(out).__name__} holding {', '.join(type(x).__name__ for x in out)}"
    return f"a {type(out).__name__}"


def _init_distributed(setup: RankSetup) -> torch.device:
    kwargs: dict[str, Any] = {}
    if setup.backend == "nccl":
        os.environ.update(NO_MULTICAST)  # forced, not defaulted: a host must never opt in
        device = torch.device("cuda", setup.rank)
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        setup.backend,
        init_method=f"file://{setup.rendezvous}",
        rank=setup.rank,
        world_size=setup.world_size,
        timeout=COLLECTIVE_TIMEOUT,
        **kwargs,
    )
    return device


def import_solution(path: Path, module_name: str) -> Any:
    """Import a bundle file as `module_name`, from its own folder; returns its `solution`."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # so that `import _helper` works
    os.chdir(path.parent)  # files a solution writes land in the scratch directory
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    solution = getattr(module, "solution", None)
    if not callable(solution):
        raise TypeError(f"{path.name} defines no callable solution")
    return solution


def confine_output(log_path: str) -> None:
    """Bundle code's output goes to its log; no file it writes grows past the cap
    (sandbox.Limits.file_bytes may lower it further)."""
    _redirect_output(log_path)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_CANDIDATE_FILE_BYTES, MAX_CANDIDATE_FILE_BYTES))


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("inf")


def _nbytes(value: Any) -> int:
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


def die_with_parent() -> None:
    # If the evaluator itself is killed (Celery's hard time limit), its ranks follow.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode("utf-8")


def _reply(conn: Connection, data: dict[str, Any]) -> None:
    conn.send_bytes(_json(data))


# The harness itself: a solution that swaps these to report other times is flagged.
for _owner, _name in (
    (_Candidate, "_time"),
    (_Candidate, "_ship"),
    (_Worker, "timed_round"),
    (_Worker, "inputs"),
    (_Worker, "batch"),
    (_Commitment, "after_call"),
    (_Commitment, "commitments"),
    (_Commitment, "reveal"),
    (Connection, "send_bytes"),
    (Connection, "recv"),
    (Connection, "recv_bytes"),
    (_Candidate, "handle"),
    (sys.modules[__name__], "run_batch"),
    (sys.modules[__name__], "digest"),
    (sys.modules[__name__], "_reply"),
    (timing, "run_batch"),
    (timing, "_cuda_batch"),
    (timing, "digest"),
    (timing, "_tensor_digest"),
    (timing, "_perf_counter"),
    (timing, "_event_elapsed"),
    (timing, "_cuda_sync"),
    (timing, "tampering"),
):
    timing.watch(_owner, _name)
