from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import SUMS_OVER_RANKS, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(case.params["n"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # The bandwidth-optimal bound: each rank sends 2(W-1)/W of its buffer.
    return 2 * (world_size - 1) * case.params["n"] * case.itemsize // world_size


PROBLEM = Problem(
    slug="all-reduce",
    title="All-reduce (sum)",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements. Every rank returns the elementwise "
        "sum of all ranks' vectors, in `x`'s dtype.\n\n"
        "The reference calls `torch.distributed.all_reduce`. A bandwidth-optimal algorithm "
        "sends 2(W-1)/W of the buffer per rank (a reduce-scatter, then an all-gather). Over "
        "symmetric memory each rank can read its 1/W slice from every peer, sum it, and "
        "publish the sum for the peers to read back."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=SUMS_OVER_RANKS,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000}),
        Case("dev-bf16", "bfloat16", {"n": 4096}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-64m", "bfloat16", {"n": 1 << 26}),
    ),
)
