from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM, weight


def solution(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    y = x @ w + bias
    m, local_n = y.shape
    # all_gather_into_tensor stacks the ranks' [M, N/W] blocks one under another; the
    # output wants them side by side along the columns.
    stacked = y.new_empty(world_size * m, local_n)
    dist.all_gather_into_tensor(stacked, y)
    return stacked.view(world_size, m, local_n).transpose(0, 1).reshape(m, world_size * local_n)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n, world_size = case.params["m"], case.params["k"], case.params["n"], ctx.world_size
    return {
        "x": ctx.randn(m, k, shared=True),
        "w": weight(ctx, k, k, n // world_size),
        "bias": ctx.randn(n // world_size),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's [M, N/W] output block must reach each of the W-1 peers.
    m, n = case.params["m"], case.params["n"]
    return (world_size - 1) * m * (n // world_size) * case.itemsize


PROBLEM = Problem(
    slug="tp-column-linear-gather",
    title="Column-parallel linear with gathered output",
    category=Category.TENSOR,
    description=(
        "A column-parallel linear layer whose output every rank needs whole (Megatron-LM's "
        "ColumnParallelLinear with `gather_output=True`). Every rank holds the same "
        "activations `x` `[M, K]`; rank r holds `w` `[K, N/W]`, its column shard of the "
        "weight, and `bias` `[N/W]`, its slice of the bias. Every rank returns "
        "`x @ W + b`, shape `[M, N]`, where columns `[r*N/W, (r+1)*N/W)` come from rank "
        "r's shard.\n\n"
        "The reference computes its `[M, N/W]` block, all-gathers the blocks with "
        "`torch.distributed.all_gather_into_tensor` and interleaves them into columns "
        "with a copy. Each rank must receive the W-1 peers' blocks. Each block lands "
        "strided in the row-major output, so a kernel can write its GEMM tiles (bias "
        "added in the epilogue) straight into every peer's output over symmetric memory, "
        "overlapping the transfer with the rest of the GEMM and saving the copy."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM,
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 64, "k": 128, "n": 96}),
        Case("dev-bf16", "bfloat16", {"m": 128, "k": 256, "n": 192}),
    ),
    eval_cases=(
        Case("demo-2k", "bfloat16", {"m": 2048, "k": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"m": 8192, "k": 4096, "n": 4096}),
    ),
)
