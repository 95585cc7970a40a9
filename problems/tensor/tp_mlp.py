from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM_THEN_SUM, weight


def solution(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    hidden = F.gelu(x @ w1, approximate="tanh")
    y = hidden @ w2
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, h, f, world_size = case.params["m"], case.params["h"], case.params["f"], ctx.world_size
    return {
        "x": ctx.randn(m, h, shared=True),
        "w1": weight(ctx, h, h, f // world_size),
        "w2": weight(ctx, f, f // world_size, h),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Only the second projection's [M, H] partials cross the links, in an all-reduce:
    # each rank sends 2(W-1)/W of them. The [M, F/W] intermediate never leaves its rank.
    m, h = case.params["m"], case.params["h"]
    return 2 * (world_size - 1) * m * h * case.itemsize // world_size


PROBLEM = Problem(
    slug="tp-mlp",
    title="Tensor-parallel MLP (column- then row-parallel, GELU)",
    category=Category.TENSOR,
    description=(
        "The tensor-parallel transformer MLP of Megatron-LM: a column-parallel up "
        "projection, GELU, and a row-parallel down projection, with one all-reduce and no "
        "communication in between. Every rank holds the same activations `x` `[M, H]`; "
        "rank r holds `w1` `[H, F/W]`, its column shard of the up projection, and `w2` "
        "`[F/W, H]`, the matching row shard of the down projection (no biases). Every rank "
        "returns `sum_r(gelu(x @ w1_r) @ w2_r)`, shape `[M, H]`, with GELU's tanh "
        'approximation (`F.gelu(..., approximate="tanh")`).\n\n'
        "The reference runs two GEMMs, rounding the `[M, F/W]` intermediate to the input "
        "dtype after the GELU, then calls `torch.distributed.all_reduce` on the `[M, H]` "
        "partial. Only that partial must cross the links (2(W-1)/W of it per rank with a "
        "bandwidth-optimal all-reduce). A kernel can fuse the GELU into the first GEMM's "
        "epilogue and reduce the output tiles of the second GEMM across ranks over "
        "symmetric memory as they finish, overlapping the reduction with the GEMM."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM_THEN_SUM,
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 32, "h": 64, "f": 128}),
        Case("dev-bf16", "bfloat16", {"m": 64, "h": 128, "f": 256}),
    ),
    eval_cases=(
        Case("demo-512", "bfloat16", {"m": 512, "h": 4096, "f": 14336}),
        Case("demo-2k", "bfloat16", {"m": 2048, "h": 4096, "f": 14336}),
    ),
)
