import torch
from _fast import combine, team


def solution(x: torch.Tensor) -> torch.Tensor:
    # One kernel: one-shot below 512 KiB (or at W = 2), two-shot above.
    return combine(x, team("all-reduce", x.numel(), x.dtype))
