import torch
import torch.distributed as dist


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    total = x.clone()
    dist.all_reduce(total)
    return total if dist.get_rank() == root else x.new_empty(0)
