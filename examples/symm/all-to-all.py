import torch
import torch.distributed as dist
from _symm import BLOCK, copy_from_peers, grid

from evaluator.runtime import symm_buffer


def solution(x: torch.Tensor) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    chunk = x.numel() // world
    buf = symm_buffer("all-to-all", x.numel(), x.dtype)
    buf.tensor.copy_(x)
    buf.barrier()
    out = torch.empty_like(x)
    # Chunk p of the output is chunk `rank` of peer p's input.
    copy_from_peers[grid(chunk, world)](
        buf.ptrs, out, chunk, x.numel(), rank * chunk, 0, WORLD=world, BLOCK=BLOCK
    )
    buf.barrier()
    return out
