import torch
from _fast import gather, team


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    rows, k = a.shape
    group = team("tp-allgather-gemm-rows", a.numel(), a.dtype)
    gathered = gather(a.reshape(-1), group).view(group.world * rows, k)
    return gathered @ b
