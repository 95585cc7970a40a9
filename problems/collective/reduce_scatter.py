from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import SUMS_OVER_RANKS, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty(x.numel() // dist.get_world_size())
    dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.SUM)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(ctx.world_size * case.params["n"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r must receive the other ranks' contributions to its chunk: (W-1)·n elements.
    return (world_size - 1) * case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="reduce-scatter",
    title="Reduce-scatter (sum)",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `W * n` elements, seen as W chunks of `n`. Rank r "
        "returns chunk r of the elementwise sum over ranks (`n` elements).\n\n"
        "The reference calls `torch.distributed.reduce_scatter_tensor`. Each rank must "
        "receive the (W-1) peers' versions of its own chunk; over symmetric memory a rank "
        "can read its chunk from every peer's buffer and sum locally."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=SUMS_OVER_RANKS,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 500}),
        Case("dev-bf16", "bfloat16", {"n": 2048}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 18}),
        Case("demo-64m", "bfloat16", {"n": 1 << 24}),
    ),
)
