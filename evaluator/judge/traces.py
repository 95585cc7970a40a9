"""A profile run's traces, read on the trusted side: untrusted bytes in, data out.

A candidate's runner writes its Chrome trace (torch.profiler / Kineto) into a file the
evaluating process made for it (`judge/profiling.py`). Whatever is in that file came from
a process where bundle code runs, so it is read like a reply: never through a link, never
more than READ_CAP_BYTES, checked for the number of JSON values it could make before it
is parsed (memory stays within a few times its size), parsed strictly (no NaN, no
Infinity, no nesting past Python's recursion limit), and written out again by this
process, so that the artifact the team downloads is valid JSON whatever the file held.
Any of that failing drops the trace (TraceError says why); nothing here raises anything
else on hostile bytes. Numbers summarised from a forged trace mislead only its own team.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A trace of 10-20 calls is tens of KiB on CPU ranks and a few MiB at most on a GPU;
# anything larger than this is not read at all.
READ_CAP_BYTES = 24 * 1024 * 1024
# Commas, braces and brackets bound the values a JSON text makes: at most this many keeps
# the parse near 100 bytes a value (a 24 MiB Kineto trace has about 1.5 million).
MAX_VALUES = 2_000_000
# Top-level keys besides the events (Kineto's schema version, device properties, ...)
# kept when they are this small together; `traceName` (a path on the host) never.
MAX_META_BYTES = 64 * 1024
LARGEST = 1e18  # microseconds: 30,000 years; a larger time is no time
DROPPED_META = ("traceEvents", "traceName", "otherData")

# Work on a device: what "device time" sums (Kineto's categories).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
# Not work of their own: the profiler's frame, Python frames, CUDA API calls (their
# kernels are counted on the device) and the harness's own mark around each call.
SKIPPED_CATEGORIES = frozenset({"Trace", "python_function", "cuda_runtime", "cuda_driver"})
ANNOTATION = "pkb.solution"  # what the candidate's runner marks each call with
# The rule for communication: a kernel or operator whose name, in lower case and without
# underscores, contains one of these: NCCL's kernels, gloo's and c10d's operators,
# symmetric memory's and NVSHMEM's kernels, and anything named after a collective (a
# Triton kernel `_all_reduce_kernel` counts). Everything else is compute.
COMMUNICATION_WORDS = (
    "nccl",
    "gloo",
    "c10d",
    "symm",
    "multimem",
    "nvshmem",
    "recordparamcomms",
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
)
TOP = 15  # rows per rank in the summary


class TraceError(ValueError):
    """A trace that is dropped, with the reason shown to its team."""


def read_trace(path: Path, cap: int = READ_CAP_BYTES) -> bytes:
    """The bytes of a trace file: never through a link, never a FIFO or device, never
    more than `cap` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TraceError(f"no trace file ({exc.strerror})") from None
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TraceError("the trace is not a plain file")
        data = file.read(cap + 1)
    if not data:
        raise TraceError("the runner wrote no trace")
    if len(data) > cap:
        raise TraceError(f"the trace is over {cap >> 20} MiB: not read")
    return data


@dataclass
class Trace:
    events: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)


def parse_trace(data: bytes) -> Trace:
    """The trace's events (JSON objects only) and small top-level keys, or TraceError."""
    values = data.count(b",") + data.count(b"{") + data.count(b"[")
    if values > MAX_VALUES:
        raise TraceError(f"the trace holds over {MAX_VALUES:,} JSON values: not parsed")
    try:
        document = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise TraceError("the trace nests too deeply") from None
    except MemoryError:
        raise TraceError("the trace is too large to parse") from None
    except ValueError as exc:  # not JSON, not UTF-8, NaN, an integer of 5,000 digits
        raise TraceError(f"the trace is not valid JSON ({str(exc)[:120]})") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceError("the trace has no list of traceEvents")
    meta = {}
    if isinstance(document, dict):
        meta = {k: v for k, v in document.items() if k not in DROPPED_META}
    try:
        if len(_dump(meta)) > MAX_META_BYTES:
            meta = {}
    except RecursionError:
        meta = {}
    return Trace([e for e in events if isinstance(e, dict)], meta)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def fit_trace(trace: Trace, cap: int, note: str = "") -> tuple[bytes, int]:
    """The trace as JSON of at most `cap` bytes, and how many events were left out to fit:
    metadata events first, then the others in time order, as many as fit (so the first
    calls stay whole), and a note in `otherData.pkb` saying what was left out."""
    order = sorted(range(len(trace.events)), key=lambda i: _fit_key(trace.events[i]))
    try:
        encoded = [_dump(trace.events[i]) for i in order]
    except RecursionError:  # parsed a few frames up, and written one deeper
        raise TraceError("the trace nests too deeply") from None
    head = {"displayTimeUnit": "ms", **trace.meta}
    for meta in (head, {}):  # without the metadata when it alone does not fit
        kept, dropped = _prefix(encoded, cap - len(_wrap([], meta, note, len(encoded))))
        if kept >= 0:
            text = _wrap(encoded[:kept], meta, note, dropped)
            if len(text) <= cap:
                return text, dropped
    return b"", len(encoded)


def _fit_key(event: dict[str, Any]) -> tuple[int, float]:
    when = _number(event.get("ts"))
    return (0 if event.get("ph") == "M" else 1, math.inf if when is None else when)


def _number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else, and for integers too large for
    one (JSON allows 4,000 digits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if -LARGEST < value < LARGEST else None


def _prefix(encoded: list[bytes], room: int) -> tuple[int, int]:
    """How many of `encoded` fit in `room` bytes (with their commas), and how many not;
    -1 when not even the frame fits."""
    if room < 0:
        return -1, len(encoded)
    used, kept = 0, 0
    for item in encoded:
        used += len(item) + 1
        if used > room:
            break
        kept += 1
    return kept, len(encoded) - kept


def _wrap(events: list[bytes], meta: dict[str, Any], note: str, dropped: int) -> bytes:
    if dropped:
        note = f"{note} {dropped} events left out to fit the size cap.".strip()
    tail = _dump({**meta, "otherData": {"pkb": note}})[1:]  # '"displayTimeUnit":..}'
    return b'{"traceEvents":[' + b",".join(events) + b"]," + tail


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def is_communication(name: str) -> bool:
    squashed = name.lower().replace("_", "")
    return any(word in squashed for word in COMMUNICATION_WORDS)


@dataclass
class Row:
    name: str
    calls: int = 0
    total_us: float = 0.0

    @property
    def communication(self) -> bool:
        return is_communication(self.name)


@dataclass
class RankSummary:
    """Where one rank's profiled calls spent their time, by kernel (device time) where
    the trace has kernels, else by CPU operator (self time: a parent's time less its
    children's, so that nested operators are not counted twice)."""

    device: bool
    rows: list[Row]  # every kernel or operator, longest total first
    calls: int  # the runner's marks around its calls of `solution`
    communication_us: float = 0.0
    compute_us: float = 0.0

    @property
    def top(self) -> list[Row]:
        return self.rows[:TOP]


def summarize(trace: Trace) -> RankSummary:
    spans = [span for e in trace.events if e.get("ph") == "X" and (span := _span(e))]
    # The runner's marks on the CPU (on GPUs Kineto shows each again on the device).
    calls = sum(1 for s in spans if s.name == ANNOTATION and s.category == "user_annotation")
    device = [span for span in spans if span.category in DEVICE_CATEGORIES]
    if device:
        durations = [(span.name, span.dur) for span in device]
    else:
        durations = _self_times([span for span in spans if span.host_work])
    rows: dict[str, Row] = {}
    for name, us in durations:
        row = rows.setdefault(name, Row(name))
        row.calls, row.total_us = row.calls + 1, row.total_us + us
    ordered = sorted(rows.values(), key=lambda r: (-r.total_us, r.name))
    summary = RankSummary(device=bool(device), rows=ordered, calls=calls)
    summary.communication_us = sum(r.total_us for r in ordered if r.communication)
    summary.compute_us = sum(r.total_us for r in ordered if not r.communication)
    return summary


@dataclass(frozen=True)
class _Span:
    """A complete event ("ph": "X"), as far as the summary reads it."""

    name: str
    category: str
    thread: tuple[str, str]
    ts: float
    dur: float

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def host_work(self) -> bool:
        return (
            self.category not in SKIPPED_CATEGORIES
            and self.name != ANNOTATION
            and not self.name.startswith("ProfilerStep")
        )


def _span(event: dict[str, Any]) -> _Span | None:
    """The event as a span: a name, a start and a duration; None for anything else."""
    name, ts, dur = event.get("name"), _number(event.get("ts")), _number(event.get("dur"))
    if not isinstance(name, str) or ts is None or dur is None or dur < 0:
        return None
    thread = (str(event.get("pid"))[:40], str(event.get("tid"))[:40])
    return _Span(name, str(event.get("cat"))[:40], thread, ts, dur)


def _self_times(spans: list[_Span]) -> list[tuple[str, float]]:
    """Each operator's time less its children's, per thread: an operator that starts
    inside another (before it ends) is its child."""
    threads: dict[tuple[str, str], list[_Span]] = defaultdict(list)
    for span in spans:
        threads[span.thread].append(span)
    found: list[tuple[str, float]] = []
    for thread in threads.values():
        thread.sort(key=lambda s: (s.ts, -s.dur))
        own = [span.dur for span in thread]
        stack: list[int] = []  # the open operators, innermost last
        for i, span in enumerate(thread):
            while stack and thread[stack[-1]].end <= span.ts:
                stack.pop()
            if stack:
                parent = stack[-1]
                own[parent] -= min(span.dur, thread[parent].end - span.ts)
            stack.append(i)
        found.extend((span.name, max(0.0, t)) for span, t in zip(thread, own, strict=True))
    return found
