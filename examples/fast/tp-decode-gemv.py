import torch
from _fast import combine, team


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # A few KiB to exchange: one launch of the one-shot all-reduce (one in-kernel barrier)
    # instead of NCCL's launch and protocol; the GEMV writes into the symmetric buffer.
    rows, n = w.shape
    start = torch.distributed.get_rank() * rows
    group = team("tp-decode-gemv", x.shape[0] * n, x.dtype)
    partial = group.stage(x.shape[0] * n)
    torch.matmul(x[:, start : start + rows], w, out=partial.view(x.shape[0], n))
    return combine(partial, group).view(x.shape[0], n)
