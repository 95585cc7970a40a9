"""The host's peer bandwidth, and the floor it puts under every time.

`measure_peer_bandwidth` runs on every trusted judge rank at once (it is collective): each
rank writes into its peers' symmetric buffers over NVLink, timed with CUDA events, once to
one peer and once to all peers at the same time. The floor of a case is the bytes one rank
must move over the links divided by the larger of the two: the per-GPU injection
bandwidth, so that a floor is never above what the hardware can do (docs/architecture.md:
a collective's roofline uses it, not a per-pair figure). A time below the floor is
physically impossible and flags the result.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch
import torch.distributed as dist

PROBE_BYTES = 256 * 1024**2
PROBE_WARMUP = 3
PROBE_REPS = 10


def measure_peer_bandwidth(
    *, nbytes: int = PROBE_BYTES, warmup: int = PROBE_WARMUP, reps: int = PROBE_REPS
) -> dict[str, float]:
    """GB/s one rank writes to peers: {"one_peer", "all_peers", "used"}, the slowest rank's.

    Collective over the default group: every rank calls it with the same arguments. Needs
    CUDA ranks of a NCCL group (one GPU each).
    """
    import torch.distributed._symmetric_memory as symm_mem

    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise ValueError("the peer bandwidth needs at least 2 ranks")
    device = torch.device("cuda", torch.cuda.current_device())
    slot = nbytes // (world - 1)
    nbytes = slot * (world - 1)
    buffer = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
    group = dist.group.WORLD
    assert group is not None, "the default process group is not initialised"
    handle = symm_mem.rendezvous(buffer, group.group_name)
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    peers = [(rank + k) % world for k in range(1, world)]

    neighbour = handle.get_buffer(peers[0], (nbytes,), torch.uint8)

    def one_peer() -> None:
        neighbour.copy_(source)

    # The k-th slice of ours goes to slot k of the k-th peer's buffer: every buffer gets one
    # slice from each of the other ranks, and no two writers share a slot.
    slices = [
        (
            handle.get_buffer(peer, (nbytes,), torch.uint8)[k * slot : (k + 1) * slot],
            source[k * slot : (k + 1) * slot],
        )
        for k, peer in enumerate(peers)
    ]
    streams = [torch.cuda.Stream(device) for _ in peers]

    def all_peers() -> None:
        main = torch.cuda.current_stream(device)
        for (target, part), stream in zip(slices, streams, strict=True):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                target.copy_(part)
            main.wait_stream(stream)

    one = _gbps(nbytes, _time(one_peer, warmup, reps, device))
    every = _gbps(nbytes, _time(all_peers, warmup, reps, device))
    slowest = torch.tensor([one, every], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MIN)
    one, every = slowest.tolist()
    # Nobody frees its buffer while a peer may still be writing into it.
    torch.cuda.synchronize(device)
    dist.barrier()
    return {"one_peer": one, "all_peers": every, "used": max(one, every)}


def _time(fn: Any, warmup: int, reps: int, device: torch.device) -> float:
    """Median seconds of `fn`, every rank starting each repetition together."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + reps):
        torch.cuda.synchronize(device)
        dist.barrier()
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9
