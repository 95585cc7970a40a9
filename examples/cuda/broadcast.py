import torch
import torch.distributed as dist
from _peer_copy import build

from evaluator.runtime import symm_buffer

# Built at import: the evaluator imports every solution before the ranks start.
_ext = build("broadcast_copy")


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    # The root publishes its vector; every rank pulls it from the root's buffer.
    buf = symm_buffer("broadcast", x.numel(), x.dtype)
    if dist.get_rank() == root:
        buf.tensor.copy_(x)
    buf.barrier()
    out = torch.empty_like(x)
    _ext.peer_copy(buf.handle.buffer_ptrs[root], out)
    buf.barrier()
    return out
