"""Statistics of times, and the benchmarks' timing loop (numbers to read, not the judge).

The evaluator's clock is the judge's (`evaluator.judge.link.Clock`): a round's time is what
the judge measured from before it wrote a round's inputs to after it read the outputs it
checks, divided by the calls. The parent alternates reference and candidate rounds
(A B, B A, ...) and takes the median over blocks of two pairs, one of each order, with a
distribution-free interval (`evaluator.judge.stats`).

`run_timed` / `time_calls` time calls in one process (a device synchronise and a barrier
around every call), for the benchmarks (`evaluator.tools.bench`, `.references`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

_perf_counter = time.perf_counter
_barrier = dist.barrier
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize


@dataclass(frozen=True)
class TimingSummary:
    median_us: float
    spread_us: float  # interquartile range
    iterations: int


def run_timed(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], dict[str, Any]],
    *,
    calls: int,
    device: torch.device,
    after_call: Callable[[int, Any], None] | None = None,
) -> list[float]:
    """Call `fn(**make_inputs(i))` for i in range(calls), each timed the same way, and
    return every call's time in microseconds.

    `after_call(i, output)` runs after call i's stop timestamp and before call i+1's
    inputs are made: outside the timed interval, while the output is still what the call
    returned (a solution may legitimately reuse its output buffer in the next call).
    """
    times: list[float] = []
    for i in range(calls):
        args = make_inputs(i)
        elapsed, out = _timed_call(fn, args, device)
        times.append(elapsed)
        if after_call is not None:
            after_call(i, out)
        del args, out
    return times


def _timed_call(fn: Callable[..., Any], args: dict[str, Any], device: torch.device) -> Any:
    if device.type == "cuda":
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _cuda_sync(device)
        _barrier()
        _event_record(start)
        out = fn(**args)
        _cuda_sync(device)  # side streams and pending collectives end inside the interval
        _event_record(end)
        _event_sync(end)
        return _event_elapsed(start, end) * 1000.0, out
    _barrier()
    began = _perf_counter()
    out = fn(**args)
    return (_perf_counter() - began) * 1e6, out


def copy_output(out: Any) -> Any:
    """A copy of a Tensor output, or of each Tensor in a tuple or list (a solution may
    legitimately reuse its output buffers in its next call)."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(copy_output(x) for x in out)
    return out


def time_calls(
    fn: Callable[..., Any],
    inputs: Sequence[dict[str, Any]],
    *,
    warmup: int,
    iters: int,
    device: torch.device,
) -> tuple[list[float], Any]:
    """The benchmarks' form: rotate through prepared `inputs`; times of the timed calls
    and a copy of the last output. (The evaluator itself uses `run_timed` with fresh
    inputs.)"""
    calls = warmup + iters
    last: list[Any] = []

    def keep_last(i: int, out: Any) -> None:
        # Every output is copied, as the evaluator copies each: the work between calls
        # changes how fast the next call starts.
        last[:] = [copy_output(out)]

    times = run_timed(
        fn, lambda i: inputs[i % len(inputs)], calls=calls, device=device, after_call=keep_last
    )
    return times[warmup:], last[0]


def summarize(per_rank: Sequence[Sequence[float]]) -> TimingSummary:
    """Median and interquartile spread of the slowest rank's time per iteration."""
    lengths = {len(times) for times in per_rank}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"ranks report different or no iteration counts: {sorted(lengths)}")
    slowest = [max(column) for column in zip(*per_rank, strict=True)]
    if len(slowest) == 1:
        return TimingSummary(slowest[0], 0.0, 1)
    q1, _, q3 = statistics.quantiles(slowest, n=4, method="inclusive")
    return TimingSummary(statistics.median(slowest), q3 - q1, len(slowest))
