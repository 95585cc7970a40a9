from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, root: int) -> torch.Tensor:
    out = x.clone()
    dist.broadcast(out, src=root)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Every rank gets a buffer of its own random data; only the root's is the message.
    # The root changes between trials, so a kernel cannot assume rank 0.
    return {"x": ctx.randn(case.params["n"]), "root": ctx.choice(ctx.world_size)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every element must leave the root at least once and reach every other rank.
    return case.params["n"] * case.itemsize


PROBLEM = Problem(
    slug="broadcast",
    title="Broadcast",
    category=Category.COLLECTIVE,
    description=(
        "Every rank holds a vector `x` of `n` elements and the same `root`. Every rank "
        "returns the root's `x`; the other ranks' `x` is scratch data to be replaced.\n\n"
        "The reference calls `torch.distributed.broadcast`. The root must send each "
        "element at least once and every other rank must receive all `n`; over symmetric "
        "memory the peers can read the root's buffer directly, or the root can scatter "
        "chunks that the peers then exchange (scatter + all-gather)."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000}),
        Case("dev-bf16", "bfloat16", {"n": 4096}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-64m", "bfloat16", {"n": 1 << 26}),
    ),
)
