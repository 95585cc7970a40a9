import torch
from _fast import exchange, team


def solution(x: torch.Tensor) -> torch.Tensor:
    return exchange(x, team("reduce-scatter", x.numel(), x.dtype), reduce=True)
