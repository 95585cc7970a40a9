from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import SUMS_OVER_RANKS, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    out = x.clone()
    dist.reduce(out, dst=root, op=dist.ReduceOp.SUM)
    if dist.get_rank() != root:
        return x.new_empty(0)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(case.params["n"]), "root": ctx.choice(ctx.world_size)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every element of every non-root rank must influence the root's sum, so each
    # non-root rank sends at least n elements (partial sums included).
    return case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="reduce",
    title="Reduce to a root (sum)",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements and the same `root`. The root "
        "returns the elementwise sum over ranks; every other rank returns an empty tensor "
        "(`x.new_empty(0)`).\n\n"
        "The reference calls `torch.distributed.reduce`. Each non-root rank must send "
        "`n` elements (or partial sums of them); a reduce-scatter followed by a gather to "
        "the root spreads the additions over all ranks."
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
