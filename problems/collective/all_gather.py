from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty(dist.get_world_size() * x.numel())
    dist.all_gather_into_tensor(out, x)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(case.params["n"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's chunk must reach W-1 peers; each rank receives (W-1) chunks.
    return (world_size - 1) * case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="all-gather",
    title="All-gather",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements. Every rank returns the concatenation "
        "of all ranks' vectors in rank order (`W * n` elements): rank r's `x` lands at "
        "`[r*n, (r+1)*n)`.\n\n"
        "The reference calls `torch.distributed.all_gather_into_tensor`. Each rank must "
        "receive (W-1)·n elements; over symmetric memory each rank can write its chunk "
        "straight into every peer's output buffer, then signal."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000}),
        Case("dev-bf16", "bfloat16", {"n": 2048}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-16m", "bfloat16", {"n": 1 << 24}),
    ),
)
