import torch
import torch.distributed as dist
from _symm import BLOCK, grid, sum_from_peers

from evaluator.runtime import symm_buffer


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    chunk = x.numel() // world
    buf = symm_buffer("reduce-scatter", x.numel(), x.dtype)
    buf.tensor.copy_(x)
    buf.barrier()
    out = x.new_empty(chunk)
    sum_from_peers[grid(chunk)](buf.ptrs, out, chunk, rank * chunk, WORLD=world, BLOCK=BLOCK)
    buf.barrier()
    return out
