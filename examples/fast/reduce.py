import torch
from _fast import combine, team


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    # The all-reduce kernel with only the root keeping the result: the two-shot form
    # spreads the additions over every rank, then the root alone gathers the slices.
    out = combine(x, team("reduce", x.numel(), x.dtype), dst=root)
    return out if torch.distributed.get_rank() == root else x.new_empty(0)
