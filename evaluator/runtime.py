"""Helpers a solution may import on GPU hosts: symmetric buffers and CUDA extensions.

    from evaluator.runtime import symm_buffer, load_cuda

`symm_buffer(name, numel, dtype)` gives this rank a buffer in symmetric memory, with its
peers' addresses and a cross-GPU barrier. The first call with a name is collective (every
rank must make it, with the same arguments) and pays the rendezvous (~3 s on H200s); later
calls return the same buffer at no cost, so call it inside `solution` freely.

`load_cuda(name, cuda_source=..., cpp_source=..., functions=[...])` compiles a CUDA
extension once per content hash into the evaluation's own cache (PKB_EXTENSION_CACHE, in
its scratch directory: no bundle ever loads another's build); whoever comes first
compiles, the others wait for it and load the result. Call it at module import time: the
evaluator imports every solution file once, each in a process of its own and all in
parallel (evaluator.compile), before any rank starts, so bundles with many CUDA problems
compile on all cores at once, the ranks' own imports load the cached builds, and nothing
is compiled while timed. That first import has no process group: keep collectives,
`symm_buffer` and anything else that needs the peers out of module-level code. A file
that fails to import there is a compile error and never runs on the ranks.

NVLink multicast stays off on shared hosts: the evaluator sets NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 for every rank; do not call
multimem operations.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
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

    def peer(self, rank: int) -> torch.Tensor:
        """A tensor over rank `rank`'s buffer, readable and writable over NVLink."""
        return self.handle.get_buffer(rank, tuple(self.tensor.shape), self.tensor.dtype)

    def barrier(self, channel: int = 0) -> None:
        """Every rank reaches this point on its current stream before any goes on."""
        self.handle.barrier(channel=channel)


_BUFFERS: dict[tuple, SymmBuffer] = {}


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
    tensor = symm_mem.empty(numel, dtype=dtype, device=device)
    handle = symm_mem.rendezvous(tensor, group.group_name)
    ptrs = torch.tensor(list(handle.buffer_ptrs), dtype=torch.int64, device=device)
    found = SymmBuffer(tensor, handle, ptrs, handle.rank, handle.world_size)
    _BUFFERS[key] = found
    return found


def _view(buffer: SymmBuffer, numel: int) -> SymmBuffer:
    if buffer.tensor.numel() == numel:
        return buffer
    return SymmBuffer(
        buffer.tensor[:numel], buffer.handle, buffer.ptrs, buffer.rank, buffer.world_size
    )


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
