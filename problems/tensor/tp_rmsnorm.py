from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

EPS = 1e-6


def solution(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    hidden = x.shape[-1] * dist.get_world_size()
    sum_sq = x.float().square().sum(-1)
    dist.all_reduce(sum_sq, op=dist.ReduceOp.SUM)
    inv_rms = torch.rsqrt(sum_sq / hidden + EPS)
    return (x.float() * inv_rms[:, None] * weight.float()).to(x.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows, local = case.params["m"], case.params["h"] // ctx.world_size
    # A trained gain sits near 1; this rank holds its slice of the hidden dim.
    weight = 1 + 0.1 * ctx.randn(local, dtype=torch.float32)
    return {"x": ctx.randn(rows, local), "weight": weight.to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Only the per-row float32 sums of squares cross the links, all-reduced:
    # the bandwidth-optimal all-reduce sends 2(W-1)/W of the m partials.
    return 2 * (world_size - 1) * case.params["m"] * 4 // world_size


PROBLEM = Problem(
    slug="tp-rmsnorm",
    title="RMSNorm over a sharded hidden dimension",
    category=Category.TENSOR,
    description=(
        "Tensor-parallel RMSNorm, as after a row-parallel layer that leaves the hidden "
        "dimension split. The full activation is `[m, h]`; rank r holds columns "
        "`[r*h/W, (r+1)*h/W)` as `x` (`[m, h/W]`) and the matching slice of the gain as "
        "`weight` (`[h/W]`). Rank r returns its own slice of "
        "`x / sqrt(mean(x_full**2, over all h columns) + 1e-6) * weight`, `[m, h/W]` in "
        "`x`'s dtype.\n\n"
        "The reference squares and sums its slice per row in float32, all-reduces the `m` "
        "partial sums with `torch.distributed.all_reduce`, then scales locally in float32 and "
        "casts back. Only the `m` float32 partials need to cross the links (a few KiB), so "
        "the problem is latency-bound: one fused kernel that computes the partials, pushes "
        "them to every peer over symmetric memory, waits on a flag and normalises beats "
        "three kernels around an NCCL call."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32: the sum of squares is split over ranks and summed in another order, a few
    # float32 roundings on outputs of size ~4. bfloat16: the output is rounded to 8
    # significant bits (up to 2^-8 relative), twice if a kernel rounds before the gain.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 24, "h": 256}),
        Case("dev-bf16", "bfloat16", {"m": 16, "h": 512}),
    ),
    eval_cases=(
        Case("demo-2k-tokens", "bfloat16", {"m": 2048, "h": 8192}),
        Case("demo-8k-tokens", "bfloat16", {"m": 8192, "h": 8192}),
    ),
)
