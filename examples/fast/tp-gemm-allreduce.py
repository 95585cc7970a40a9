import torch
from _fast import combine, team


def solution(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # The GEMM writes its partial straight into the symmetric buffer (no copy in), and
    # the all-reduce adds the bias to the float32 sum before its one rounding.
    m, n = x.shape[0], w.shape[1]
    group = team("tp-gemm-allreduce", m * n, x.dtype)
    partial = group.stage(m * n)
    torch.matmul(x, w, out=partial.view(m, n))
    return combine(partial, group, bias=bias).view(m, n)
