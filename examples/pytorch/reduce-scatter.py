import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    # After the all-to-all, row j holds rank j's version of this rank's chunk.
    world_size = dist.get_world_size()
    received = torch.empty_like(x)
    dist.all_to_all_single(received, x)
    return received.view(world_size, -1).float().sum(0).to(x.dtype)
