from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import SUMS_OVER_RANKS, Case, Category, InputContext, Problem

EPS = 1e-5


def solution(
    partial: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    summed = partial.new_empty(partial.shape[0] // world_size, partial.shape[1])
    dist.reduce_scatter_tensor(summed, partial, op=dist.ReduceOp.SUM)
    hidden = summed + residual
    h32 = hidden.float()
    rms = torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + EPS)
    normed = (h32 * rms * weight.float()).to(partial.dtype)
    return normed, hidden


def make_inputs(case: Case, ctx: InputContext) -> dict:
    t, h = case.params["t"], case.params["h"]
    return {
        "partial": ctx.randn(t, h),
        "residual": ctx.randn(t // ctx.world_size, h),
        "weight": ctx.randn(h, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A reduce-scatter of the [T, H] partial sums: every rank's contribution to the W-1
    # other ranks' row blocks must leave it, (W-1)·(T/W)·H elements. Residual and weight
    # stay local.
    t, h = case.params["t"], case.params["h"]
    return (world_size - 1) * (t // world_size) * h * case.itemsize


PROBLEM = Problem(
    slug="sp-reducescatter-rmsnorm",
    title="Sequence parallel: reduce-scatter + residual add + RMSNorm",
    category=Category.SEQUENCE,
    description=(
        "The exit of a row-parallel GEMM (attention output or MLP down-projection) under "
        "Megatron-style sequence parallelism. Every rank holds `partial` `[T, H]`, its "
        "partial sums of the layer output over the whole sequence; `residual` `[T/W, H]`, "
        "the residual stream for its own sequence block (rows `[r*T/W, (r+1)*T/W)`); and "
        "`weight` `[H]`, the RMSNorm weight (the same on every rank).\n\n"
        "Rank r sums row block r of `partial` over ranks, adds `residual` (rounded to the "
        "input dtype: this is the new residual stream), then applies RMSNorm in float32 "
        "with eps = 1e-5: `normed = hidden * rsqrt(mean(hidden**2, -1) + eps) * weight`, "
        "rounded once to the input dtype. It returns `(normed, hidden)`, both `[T/W, H]`.\n\n"
        "The reference calls `torch.distributed.reduce_scatter_tensor`, then runs the add "
        "and the norm as separate PyTorch ops, reading and writing the `[T/W, H]` block "
        "several times. Only the reduce-scatter crosses the links: each rank must send "
        "(W-1)/W of `partial`. A fused kernel can read its row block from every peer's "
        "`partial` over symmetric memory, sum in float32, add the residual and normalise "
        "each row while it is still in registers, writing each output once."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # The sum over ranks dominates the error (rounding of partial sums, as in the plain
    # reduce-scatter); the norm divides by an RMS of about sqrt(W+1), so it shrinks that
    # error, and the final rounding adds at most one ulp.
    tolerances=SUMS_OVER_RANKS,
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 16, "h": 48}),
        Case("dev-bf16", "bfloat16", {"t": 32, "h": 128}),
    ),
    eval_cases=(
        Case("demo-4k-h4096", "bfloat16", {"t": 4096, "h": 4096}),
        Case("demo-8k-h8192", "bfloat16", {"t": 8192, "h": 8192}),
    ),
)
