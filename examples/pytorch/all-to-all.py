import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    chunks = x.chunk(world_size)
    out = torch.empty_like(x).view(world_size, -1)
    out[rank] = chunks[rank]
    requests = []
    for peer in range(world_size):
        if peer != rank:
            requests.append(dist.isend(chunks[peer].contiguous(), dst=peer))
            requests.append(dist.irecv(out[peer], src=peer))
    for request in requests:
        request.wait()
    return out.flatten()
