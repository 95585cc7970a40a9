import torch
import torch.distributed as dist
from _symm import BLOCK, copy_from_peers, grid, sum_from_peers

from evaluator.runtime import symm_buffer


def solution(x: torch.Tensor) -> torch.Tensor:
    # Two shots: reduce-scatter in place (rank r sums slice r from every peer into its own
    # buffer), then all-gather the reduced slices. Each rank moves 2(W-1)/W of the buffer.
    n, world, rank = x.numel(), dist.get_world_size(), dist.get_rank()
    slice_len = -(-n // world)
    buf = symm_buffer("all-reduce", n, x.dtype)
    buf.tensor.copy_(x)
    buf.barrier()
    mine = buf.tensor[rank * slice_len : (rank + 1) * slice_len]
    sum_from_peers[grid(mine.numel())](
        buf.ptrs, mine, mine.numel(), rank * slice_len, WORLD=world, BLOCK=BLOCK
    )
    buf.barrier()
    out = torch.empty_like(x)
    copy_from_peers[grid(slice_len, world)](
        buf.ptrs, out, slice_len, n, 0, slice_len, WORLD=world, BLOCK=BLOCK
    )
    buf.barrier()
    return out
