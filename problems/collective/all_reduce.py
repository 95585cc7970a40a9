from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(case.params["n"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # A ring (or any bandwidth-optimal) all-reduce sends 2(W-1)/W of the buffer per rank.
    nbytes = case.params["n"] * _itemsize(case.dtype)
    return 2 * (world_size - 1) * nbytes // world_size


def _itemsize(dtype: str) -> int:
    from problems.spec import DTYPES

    return DTYPES[dtype].itemsize


PROBLEM = Problem(
    slug="all-reduce",
    title="All-reduce (sum)",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements. Every rank must return the "
        "elementwise sum of all ranks' vectors, in `x`'s dtype. The reference calls "
        "`torch.distributed.all_reduce`. A bandwidth-optimal algorithm sends and receives "
        "2(W-1)/W of the buffer per rank (reduce-scatter then all-gather); over symmetric "
        "memory each rank can pull its 1/W slice from every peer, sum, and publish it."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    dev_cases=(
        Case("dev-tiny", "float32", {"n": 1000}),
        Case("dev-bf16", "bfloat16", {"n": 4096}),
    ),
    eval_cases=(
        Case("demo-eval-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-eval-64m", "bfloat16", {"n": 1 << 26}),
    ),
)
