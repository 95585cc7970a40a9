import torch
from _fast import gather, team


def solution(x: torch.Tensor) -> torch.Tensor:
    return gather(x, team("all-gather", x.numel(), x.dtype))
