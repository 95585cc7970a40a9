from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    if dist.get_rank() != root:
        dist.gather(x, None, dst=root)
        return x.new_empty(0)
    out = x.new_empty(dist.get_world_size() * x.numel())
    dist.gather(x, list(out.chunk(dist.get_world_size())), dst=root)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(case.params["n"]), "root": ctx.choice(ctx.world_size)}


def bytes_moved(case: Case, world_size: int) -> int:
    # The root must receive W-1 chunks of n elements.
    return (world_size - 1) * case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="gather",
    title="Gather to a root",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements and the same `root`. The root returns "
        "the concatenation of all ranks' vectors in rank order (`W * n` elements); every "
        "other rank returns an empty tensor (`x.new_empty(0)`).\n\n"
        "The reference calls `torch.distributed.gather`. The root must receive (W-1)·n "
        "elements; over symmetric memory every rank can write its chunk into the root's "
        "output buffer at once."
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
