import torch
import torch.distributed as dist


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank == root:
        sends = [dist.isend(x, dst=peer) for peer in range(world_size) if peer != root]
        for request in sends:
            request.wait()
        return x.clone()
    out = torch.empty_like(x)
    dist.recv(out, src=root)
    return out
