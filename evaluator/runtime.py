"""Helpers a solution may import on GPU hosts: symmetric buffers and CUDA extensions.

    from evaluator.runtime import symm_buffer, load_cuda
    from evaluator.runtime_triton import peer_ptr, block_barrier   # Triton device functions

`symm_buffer(name, numel, dtype)` gives this rank a buffer in symmetric memory, with its
peers' addresses and a cross-GPU barrier. The first call with a name is collective (every
rank must make it, with the same arguments) and pays the rendezvous (~3 s on H200s); later
calls return the same buffer at no cost, so call it inside `solution` freely. A call for
more elements than the cached buffer holds is collective too: it allocates a larger one
(the old one stays allocated, since a peer's kernel may still be reading it).

For kernels that synchronise by themselves, without a separate `barrier()` launch, the
buffer also carries every rank's signal pad: `pads` (an int64 tensor of their addresses,
by rank, like `ptrs`) and `pad_bytes` (each pad's size). A pad starts zeroed; the barrier
in `evaluator.runtime_triton` leaves it zeroed again, so it can be reused call after call.
`next_epoch()` counts this rank's calls on the buffer (0, 1, 2, ...; the same sequence on
every rank), for kernels that alternate halves of the buffer between calls; `capacity` is
the whole allocation in elements, which a view from a smaller request does not show.
`evaluator.runtime_triton` (it imports triton, so only GPU hosts load it) holds the device
functions: `peer_ptr` (a rank's address from such a table) and `block_barrier` (block b of
every rank meets block b of every other, over the signal pads). examples/fast shows them
at work.

`load_cuda(name, cuda_source=..., cpp_source=..., functions=[...])` compiles a CUDA
extension once per content hash into the evaluation's own cache (PKB_EXTENSION_CACHE, in
its scratch directory: no bundle ever loads another's build); whoever comes first
compiles, the others wait for it and load the result. Call it at module import time: the
evaluator imports every solution file once, each in a process of its own and all in
parallel (evaluator.intake.compile), before any rank starts, so bundles with many CUDA problems
compile on all cores at once, the ranks' own imports load the cached builds, and nothing
is compiled while timed. That first import has no process group: keep collectives,
`symm_buffer` and anything else that needs the peers out of module-level code. A file
that fails to import there is a compile error and never runs on the ranks.

NVLink multicast stays off on shared hosts: the evaluator sets NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 for every rank; do not call
multimem operations.

This module imports no triton, so CPU hosts (and the portal's tests) can import it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

EXTENSION_CACHE_ENV = "PKB_EXTENSION_CACHE"


@dataclass
class SymmBuffer:
    """This rank's slice of a symmetric allocation and the means to reach its peers'."""

    tensor: torch.Tensor  # this rank's buffer, `numel` elements
    handle: Any  # torch's _SymmetricMemory
    ptrs: torch.Tensor  # int64 on this GPU: every rank's buffer address, by rank
    rank: int
    world_size: int
    pads: torch.Tensor  # int64 on this GPU: every rank's signal pad address, by rank
    pad_bytes: int  # each signal pad's size (int32 slots: pad_bytes // 4)
    # Shared by every view of one allocation, so the count is per buffer, not per view.
    epochs: Iterator[int] = field(default_factory=itertools.count)

    @property
    def capacity(self) -> int:
        """Elements in the whole allocation (a view from a smaller request shows fewer)."""
        return self.tensor.untyped_storage().nbytes() // self.tensor.element_size()

    def next_epoch(self) -> int:
        """This call's number on this buffer: 0, 1, 2, ... (every rank counts alike)."""
        return next(self.epochs)

    def peer(self, rank: int) -> torch.Tensor:
        """A tensor over rank `rank`'s buffer, readable and writable over NVLink."""
        return self.handle.get_buffer(rank, tuple(self.tensor.shape), self.tensor.dtype)

    def barrier(self, channel: int = 0) -> None:
        """Every rank reaches this point on its current stream before any goes on."""
        self.handle.barrier(channel=channel)


_BUFFERS: dict[tuple, SymmBuffer] = {}
# Buffers replaced by larger ones. Never freed: a peer's kernel from the previous call may
# still be reading this rank's old buffer when the new one is allocated.
_RETIRED: list[SymmBuffer] = []


def symm_buffer(
    name: str, numel: int, dtype: torch.dtype, *, group: dist.ProcessGroup | None = None
) -> SymmBuffer:
    import torch.distributed._symmetric_memory as symm_mem

    group = group or dist.group.WORLD
    assert group is not None, "the default process group is not initialised"
    device = torch.device("cuda", torch.cuda.current_device())
    key = (name, dtype, device.index, group.group_name)
    found = _BUFFERS.get(key)
    if found is not None and found.tensor.numel() >= numel:
        return _view(found, numel)
    if found is not None:
        _RETIRED.append(found)
    tensor = symm_mem.empty(numel, dtype=dtype, device=device)
    handle = symm_mem.rendezvous(tensor, group.group_name)
    found = SymmBuffer(
        tensor,
        handle,
        _table(handle.buffer_ptrs, device),
        handle.rank,
        handle.world_size,
        _table(handle.signal_pad_ptrs, device),
        int(handle.signal_pad_size),
    )
    _BUFFERS[key] = found
    return found


def _table(addresses: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(list(addresses), dtype=torch.int64, device=device)


def _view(buffer: SymmBuffer, numel: int) -> SymmBuffer:
    if buffer.tensor.numel() == numel:
        return buffer
    return dataclasses.replace(buffer, tensor=buffer.tensor[:numel])


def _cache_root() -> Path:
    root = Path(os.environ.get(EXTENSION_CACHE_ENV) or Path.home() / ".cache" / "pkb-extensions")
    root.mkdir(parents=True, exist_ok=True)
    return root


def extension_key(name: str, *parts: str) -> str:
    """Same sources, flags, torch and GPU: same build."""
    digest = hashlib.sha256(name.encode())
    for part in (*parts, torch.__version__, str(torch.version.cuda)):
        digest.update(b"\0" + part.encode())
    if torch.cuda.is_available():
        digest.update(str(torch.cuda.get_device_capability()).encode())
    return digest.hexdigest()[:16]


def load_cuda(
    name: str,
    *,
    cuda_source: str,
    cpp_source: str = "",
    functions: Sequence[str] = (),
    extra_cuda_cflags: Sequence[str] = ("-O3",),
) -> Any:
    """Compile (or load the cached build of) a CUDA extension; returns its module."""
    from torch.utils.cpp_extension import load_inline

    key = extension_key(name, cuda_source, cpp_source, *functions, *extra_cuda_cflags)
    build_dir = _cache_root() / f"{name}-{key}"
    build_dir.mkdir(exist_ok=True)
    # One builder per key on this host; the others block here, then load its .so.
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return load_inline(
            name=f"{name}_{key}",
            cpp_sources=[cpp_source] if cpp_source else [],
            cuda_sources=[cuda_source],
            functions=list(functions) or None,
            extra_cuda_cflags=list(extra_cuda_cflags),
            build_directory=str(build_dir),
            verbose=False,
        )
