from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(ctx.world_size * case.params["n"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank keeps one chunk and sends the other W-1.
    return (world_size - 1) * case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="all-to-all",
    title="All-to-all (equal splits)",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `W * n` elements, seen as W chunks of `n`. Rank r "
        "returns a vector of `W * n` elements whose chunk j is chunk r of rank j's `x`: the "
        "transpose of the (rank, chunk) grid, as in expert-parallel token dispatch.\n\n"
        "The reference calls `torch.distributed.all_to_all_single`. Each rank sends W-1 "
        "chunks and receives W-1; over symmetric memory each rank can write chunk j "
        "straight into peer j's output at offset r·n."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 500}),
        Case("dev-bf16", "bfloat16", {"n": 2048}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 18}),
        Case("demo-16m", "bfloat16", {"n": 1 << 22}),
    ),
)
