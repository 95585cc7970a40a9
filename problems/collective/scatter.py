from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    out = x.new_empty(x.numel() // world_size)
    chunks = list(x.chunk(world_size)) if dist.get_rank() == root else None
    dist.scatter(out, chunks, src=root)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Every rank gets a W*n buffer so the shape is known everywhere; only the root's
    # contents matter.
    return {"x": ctx.randn(ctx.world_size * case.params["n"]), "root": ctx.choice(ctx.world_size)}


def bytes_moved(case: Case, world_size: int) -> int:
    # The root must send W-1 chunks of n elements.
    return (world_size - 1) * case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="scatter",
    title="Scatter from a root",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `W * n` elements and the same `root`; only the "
        "root's `x` is meaningful. Rank r returns chunk r of the root's `x` "
        "(`x[r*n:(r+1)*n]`), including the root itself.\n\n"
        "The reference calls `torch.distributed.scatter`. The root must send (W-1)·n "
        "elements; over symmetric memory every rank can read its own chunk from the "
        "root's buffer in parallel."
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
        Case("demo-16m", "bfloat16", {"n": 1 << 24}),
    ),
)
