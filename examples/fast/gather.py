import torch
from _fast import gather, team


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    # Every rank stages its x; only the root reads the peers' (the others still meet it at
    # the kernel's barrier, which keeps the double-buffered halves safe).
    out = gather(x, team("gather", x.numel(), x.dtype), dst=root)
    return out if torch.distributed.get_rank() == root else x.new_empty(0)
