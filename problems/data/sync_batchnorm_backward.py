from __future__ import annotations

import torch
import torch.distributed as dist

from problems.data._batchnorm import EPS, affine, batch_sizes, channel_stats
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    channels = x.shape[1]
    dy = grad_out.float()
    xmu = x.float() - mean[None, :, None, None]
    count = x.shape[0] * x.shape[2] * x.shape[3]
    # One all-reduce for both channel sums and the element count (float32: exact below
    # 2^24 elements), as PyTorch's SyncBatchNorm backward reduces sum_dy and sum_dy_xmu.
    sums = torch.cat([dy.sum(dim=(0, 2, 3)), (dy * xmu).sum(dim=(0, 2, 3)), dy.new_tensor([count])])
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    sum_dy, sum_dy_xmu, total = sums[:channels], sums[channels:-1], sums[-1]
    mean_dy = (sum_dy / total)[None, :, None, None]
    proj = (sum_dy_xmu * invstd**2 / total)[None, :, None, None]
    grad_input = (dy - mean_dy - xmu * proj) * (invstd * weight)[None, :, None, None]
    return grad_input.to(x.dtype), sum_dy_xmu * invstd, sum_dy


def _global_stats(xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and invstd per channel of the whole batch, in float64 (a few samples at a time,
    to bound memory), rounded to float32 as the forward would save them."""
    total = torch.zeros(xs.shape[1], dtype=torch.float64, device=xs.device)
    squares = torch.zeros_like(total)
    for chunk in xs.split(16):
        wide = chunk.double()
        total += wide.sum(dim=(0, 2, 3))
        squares += (wide * wide).sum(dim=(0, 2, 3))
    count = xs.shape[0] * xs.shape[2] * xs.shape[3]
    mean = total / count
    var = squares / count - mean * mean  # float64: no harmful cancellation at these scales
    return mean.float(), torch.rsqrt(var + EPS).float()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    channels, height, width = p["channels"], p["height"], p["width"]
    sizes = batch_sizes(case, ctx)
    offset, rows = sum(sizes[: ctx.rank]), sizes[ctx.rank]
    shift, scale = channel_stats(ctx, channels)
    weight, _ = affine(ctx, channels)
    # The whole global batch comes from the shared stream, so that every rank can compute
    # the statistics the forward pass saved; each keeps its own rows. Each rank's rows sit
    # 0.25·r higher, as in dp-sync-batchnorm.
    owner = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes)).to(ctx.device)
    xs = ctx.randn(sum(sizes), channels, height, width, shared=True, dtype=torch.float32)
    xs = (xs * scale + shift + 0.25 * owner[:, None, None, None]).to(ctx.dtype)
    mean, invstd = _global_stats(xs)
    x = xs[offset : offset + rows].clone()
    del xs
    # The incoming gradient has a mean and a part along x̂ that differ by rank, so both
    # correction terms matter and sums over one rank alone are visibly wrong.
    xhat = (x.float() - mean[None, :, None, None]) * invstd[None, :, None, None]
    noise = ctx.randn(rows, channels, height, width, dtype=torch.float32)
    grad_out = noise + 0.5 + 0.25 * ctx.rank + 0.5 * xhat
    return {
        "grad_out": grad_out.to(ctx.dtype),
        "x": x,
        "weight": weight,
        "mean": mean,
        "invstd": invstd,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # An all-reduce of 2C + 1 float32 sums: 2(W-1)/W of them per rank.
    return 2 * (world_size - 1) * (2 * case.params["channels"] + 1) * 4 // world_size


PROBLEM = Problem(
    slug="dp-sync-batchnorm-backward",
    title="SyncBatchNorm backward over ragged batches",
    category=Category.DATA,
    description=(
        "The backward pass of PyTorch's `SyncBatchNorm` in training mode, the partner of "
        "dp-sync-batchnorm. Every rank holds `grad_out` and `x` `[N_r, C, H, W]` (float32 "
        "or bfloat16; N_r differs between ranks and may be 0), the same float32 `weight` "
        "`[C]`, and the statistics the forward pass saved, the same on every rank: "
        "`mean` `[C]` and `invstd` `[C]` float32 (mean and 1/√(biased var + 1e-5) of the "
        "global batch; use them as given, do not recompute them).\n\n"
        "With M = Σ_r N_r·H·W elements per channel over all ranks (each rank knows only its "
        "own N_r), `x̂ = (x − mean)·invstd`, and the sums over every rank's elements "
        "`sum_dy_c = Σ dy` and `sum_dy_xmu_c = Σ dy·(x − mean)`, all in float32 after "
        "upcasting, every rank returns `(grad_input [N_r, C, H, W] in x's dtype, "
        "grad_weight [C], grad_bias [C] float32)`: `grad_input = weight·invstd·(dy − "
        "sum_dy/M − (x − mean)·invstd²·sum_dy_xmu/M)` rounded once, and `grad_weight = "
        "sum_dy_xmu·invstd`, `grad_bias = sum_dy`, the same on every rank (already summed "
        "over ranks, so no later DDP all-reduce is needed for them).\n\n"
        "The reference computes the local channel sums, all-reduces them with the element "
        "count in one `[2C + 1]` float32 buffer and applies the formula. Only those 2C + 1 "
        "floats cross the links: the problem is a pass over `grad_out` and `x` for the "
        "sums, a small all-reduce and a second pass for `grad_input`. A kernel can push "
        "block partial sums to its peers over symmetric memory while it reads, and a rank "
        "with no rows only contributes zeros and waits for the sums."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # grad_input is ~weight·invstd (order 1) and moves by ~1e-6 with float32 sums in
    # another order; bf16 rounds it once (2^-8 relative; one ulp below |4| is at most
    # 2^-6). grad_weight and grad_bias are float32 sums of ~0.5·M same-signed terms, so
    # they sit far from zero and move by ~1e-6 relative. Sums of one rank alone are off by
    # ~0.25/invstd per element.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"batch": 3, "channels": 5, "height": 4, "width": 3}),
        Case(
            "dev-fp32-empty",
            "float32",
            {"batch": 2, "channels": 4, "height": 3, "width": 3, "empty_rank": 1},
        ),
        Case("dev-bf16", "bfloat16", {"batch": 4, "channels": 8, "height": 5, "width": 5}),
    ),
    eval_cases=(
        Case(
            "demo-n32-c256-56-empty",
            "bfloat16",
            {"batch": 32, "channels": 256, "height": 56, "width": 56, "empty_rank": 1},
        ),
        Case(
            "demo-n16-c64-112",
            "float32",
            {"batch": 16, "channels": 64, "height": 112, "width": 112},
        ),
    ),
)
