import torch
import torch.distributed as dist


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    # Simple, not frugal: everyone receives the whole buffer and keeps its chunk.
    full = x.clone()
    dist.broadcast(full, src=root)
    return full.chunk(dist.get_world_size())[dist.get_rank()].clone()
