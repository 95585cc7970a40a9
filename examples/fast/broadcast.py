import torch
from _fast import combine, team


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    # Small: every rank reads the root's buffer. Large (W > 2): every rank fetches its
    # slice from the root, then the others' slices from each other, so the root sends
    # 2(W-1)/W of the message instead of W-1 times all of it.
    return combine(x, team("broadcast", x.numel(), x.dtype), src=root)
