"""Timing on a rank (`time_calls`) and across ranks (`summarize`).

Each timed call is preceded by a barrier so the ranks start together; per iteration the
slowest rank counts, since a collective is done only when its last rank is.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class TimingSummary:
    median_us: float
    spread_us: float  # interquartile range
    iterations: int


def time_calls(
    fn: Callable[..., Any],
    inputs: Sequence[dict[str, Any]],
    *,
    warmup: int,
    iters: int,
    device: torch.device,
) -> tuple[list[float], Any]:
    """Call `fn` `warmup` times untimed, then `iters` times timed, rotating through `inputs`.

    Returns the per-call times in microseconds and the last call's output, which the
    judge checks: outputs of timed runs must be right too.
    """
    out = None
    for i in range(warmup):
        out = fn(**inputs[i % len(inputs)])
    cuda = device.type == "cuda"
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(iters):
        args = inputs[(warmup + i) % len(inputs)]
        if cuda:
            torch.cuda.synchronize(device)
            dist.barrier()
            start.record()
            out = fn(**args)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        else:
            dist.barrier()
            began = time.perf_counter()
            out = fn(**args)
            times.append((time.perf_counter() - began) * 1e6)
    return times, out


def last_input_index(*, warmup: int, iters: int, rotation: int) -> int:
    """Which of the rotated inputs the last timed call used."""
    return (warmup + iters - 1) % rotation


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
