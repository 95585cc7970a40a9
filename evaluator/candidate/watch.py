"""A tripwire in the runner's own process: attributes bundle code has no business replacing.

Defence in depth only. Nothing that decides a score runs in a runner any more (the judge
stamps the clock and reads the outputs), so a patched clock, copy or pipe method changes
no number; the judge still flags a result whose runner reports one, since only bundle
code tampering with its harness does that. Bundle code can rebind this list too.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

_WATCHED: list[tuple[Any, str, Any]] = [
    (time, "perf_counter", time.perf_counter),
    (time, "perf_counter_ns", time.perf_counter_ns),
    (time, "monotonic", time.monotonic),
    (time, "time", time.time),
    (torch.cuda, "Event", torch.cuda.Event),
    (torch.cuda, "synchronize", torch.cuda.synchronize),
    (torch.cuda.Event, "record", torch.cuda.Event.record),
    (torch.cuda.Event, "elapsed_time", torch.cuda.Event.elapsed_time),
    (torch.Tensor, "copy_", torch.Tensor.copy_),
    (torch.Tensor, "detach", torch.Tensor.detach),
    (dist, "barrier", dist.barrier),
]


def watch(owner: Any, name: str) -> None:
    """Add an attribute (of the runner itself, say) to those `tampering` checks."""
    _WATCHED.append((owner, name, getattr(owner, name)))


def tampering() -> list[str]:
    """The watched attributes that no longer hold their original value."""
    return [
        f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
        for owner, name, original in _WATCHED
        if getattr(owner, name, None) is not original
    ]
