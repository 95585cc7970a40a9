import torch
import torch.distributed as dist


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    if dist.get_rank() != root:
        dist.send(x, dst=root)
        return x.new_empty(0)
    out = x.new_empty(world_size, x.numel())
    out[root] = x
    for peer in range(world_size):
        if peer != root:
            dist.recv(out[peer], src=peer)
    return out.flatten()
