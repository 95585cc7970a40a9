import torch
from _fast import scatter, team


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    return scatter(x, team("scatter", x.numel(), x.dtype), src=root)
