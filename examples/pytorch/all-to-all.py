import torch
import torch.distributed as dist


def solution(x: torch.Tensor) -> torch.Tensor:
    # Point-to-point pairs, batched: NCCL runs unbatched isend/irecv in issue order,
    # which deadlocks when every rank sends first.
    rank, world_size = dist.get_rank(), dist.get_world_size()
    chunks = x.chunk(world_size)
    out = torch.empty_like(x).view(world_size, -1)
    out[rank] = chunks[rank]
    ops = []
    for peer in range(world_size):
        if peer != rank:
            ops.append(dist.P2POp(dist.isend, chunks[peer].contiguous(), peer))
            ops.append(dist.P2POp(dist.irecv, out[peer], peer))
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return out.flatten()
