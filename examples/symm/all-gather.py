import torch
import torch.distributed as dist
from _symm import BLOCK, copy_from_peers, grid

from evaluator.runtime import symm_buffer


def solution(x: torch.Tensor) -> torch.Tensor:
    n, world = x.numel(), dist.get_world_size()
    buf = symm_buffer("all-gather", n, x.dtype)
    buf.tensor.copy_(x)
    buf.barrier()
    out = x.new_empty(world * n)
    copy_from_peers[grid(n, world)](buf.ptrs, out, n, world * n, 0, 0, WORLD=world, BLOCK=BLOCK)
    buf.barrier()
    return out
