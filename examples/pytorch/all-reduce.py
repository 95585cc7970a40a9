import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    # Gather every rank's vector, then add them up locally in float32.
    world_size = dist.get_world_size()
    gathered = x.new_empty(world_size * x.numel())
    dist.all_gather_into_tensor(gathered, x)
    return gathered.view(world_size, -1).float().sum(0).to(x.dtype)
