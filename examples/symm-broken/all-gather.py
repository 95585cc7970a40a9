# A deliberately wrong all-gather: it lays the ranks' chunks out in reverse order.
# The evaluator must report a wrong answer that names the rank, the case and the
# worst element.
import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.cat(parts[::-1])
