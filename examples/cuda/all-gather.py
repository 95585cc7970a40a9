import torch
import torch.distributed as dist
from _peer_copy import build

from evaluator.runtime import symm_buffer

_ext = build("all_gather_copy")


def solution(x: torch.Tensor) -> torch.Tensor:
    n, world = x.numel(), dist.get_world_size()
    buf = symm_buffer("all-gather", n, x.dtype)
    buf.tensor.copy_(x)
    buf.barrier()
    out = x.new_empty(world, n)
    for peer in range(world):
        _ext.peer_copy(buf.handle.buffer_ptrs[peer], out[peer])
    buf.barrier()
    return out.flatten()
