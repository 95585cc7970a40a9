from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.fsdp._shards import (
    chunk_rows,
    clip_in_place,
    draw_grad_shard,
    equal_share_std,
    sum_of_squares,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance

NAMES = ("wqkv", "wo", "w13", "w2", "norm", "gate")


def shapes(hidden: int, ffn: int, gate: int) -> list[tuple[int, ...]]:
    """A transformer block's parameters, in input order; `gate` is a tiny vector (a
    learnable residual gate or temperature) whose few rows leave most ranks empty."""
    h = hidden
    return [(3 * h, h), (h, h), (2 * ffn, h), (h, ffn), (h,), (gate,)]


def solution(
    wqkv: torch.Tensor,
    wo: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    norm: torch.Tensor,
    gate: torch.Tensor,
    max_norm: float,
) -> tuple[torch.Tensor, ...]:
    grads = (wqkv, wo, w13, w2, norm, gate)
    # Every element lives on exactly one rank: the local sums of squares add up to the
    # global one.
    sumsq = sum_of_squares(grads, wqkv.device)
    dist.all_reduce(sumsq, op=dist.ReduceOp.SUM)
    total_norm = sumsq.sqrt()[0]
    clip_in_place(grads, total_norm, max_norm)
    return (total_norm, *grads)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    all_shapes = shapes(p["hidden"], p["ffn"], p["gate"])
    # Every tensor gets an equal share of the norm², so leaving out any one (even the
    # one-element gate) moves the norm; the total is near norm_pct% of max_norm (1.0).
    target = p["norm_pct"] / 100
    inputs = {
        name: draw_grad_shard(
            ctx,
            shape,
            ctx.world_size,
            ctx.rank,
            equal_share_std(target, math.prod(shape), len(all_shapes)),
        )
        for name, shape in zip(NAMES, all_shapes, strict=True)
    }
    return {**inputs, "max_norm": 1.0}


def bytes_moved(case: Case, world_size: int) -> int:
    # One float32 sum of squares is all-reduced: 2(W-1)/W of 4 bytes. Everything else is
    # local; this problem is about latency and one pass over the shards.
    return 2 * (world_size - 1) * 4 // world_size


def empty_shards(case: Case, world_size: int) -> list[tuple[str, int]]:
    """(tensor, rank) pairs whose shard has no rows: for the tests and the description."""
    all_shapes = shapes(case.params["hidden"], case.params["ffn"], case.params["gate"])
    return [
        (name, rank)
        for name, shape in zip(NAMES, all_shapes, strict=True)
        for rank in range(world_size)
        if chunk_rows(shape[0], world_size, rank) == 0
    ]


PROBLEM = Problem(
    slug="fsdp-clip-grad-norm",
    title="Gradient clipping by the global norm over FSDP-sharded gradients",
    category=Category.FSDP,
    description=(
        "`clip_grad_norm_` of PyTorch FSDP (FSDP2 with DTensor gradients, or FSDP1's "
        "method): the gradient norm is taken over the whole model although every rank holds "
        "only shards of the gradients, and every shard is scaled in place by the same "
        "coefficient. The gradients of a transformer block, for the case's H = hidden, "
        "F = ffn and G = gate, are `wqkv` `[3H, H]`, `wo` `[H, H]`, `w13` `[2F, H]`, `w2` "
        "`[H, F]`, `norm` `[H]` and `gate` `[G]` (a tiny vector, e.g. a learnable gate), "
        "each sharded on dim 0 as FSDP2 does (torch.chunk): with R rows and "
        "c = ceil(R/W), rank r holds rows `[r·c, min((r+1)·c, R))`, so shard sizes are "
        "ragged and some ranks' shards are empty (`gate` with G = 1 lives on rank 0 "
        "alone). Rank r holds its six shards (the case's dtype: float32 or bfloat16) and "
        "the float `max_norm`. Every rank returns `(total_norm, wqkv, wo, w13, w2, norm, "
        "gate)`: `total_norm` a 0-dim float32 tensor, then its six shards, scaled.\n\n"
        "`total_norm = sqrt(Σ g²)` over every element of every shard of every rank, each "
        "element converted to float32, squared and summed in float32 (any order). The "
        "clip coefficient is `min(1, max_norm / (total_norm + 1e-6))` in float32, and every "
        "shard is multiplied by it in place (in float32, rounded to the shard's dtype "
        "once). The returned shards must be the input tensors, scaled in place: that is "
        "what the optimizer sees after clipping, though the judge compares the returned "
        "values.\n\n"
        "The reference sums each shard's squares in float32, all-reduces the one number, "
        "and scales with `mul_`. One float crosses the links, so the time is the two "
        "passes over the local shards and one latency-bound all-reduce. A kernel can "
        "compute every shard's sum of squares in one launch, exchange the partial sums "
        "through symmetric memory with a flag instead of a collective, and scale in a "
        "second launch (or in the same one, after a grid-wide barrier)."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # The norm is a float32 sum of up to ~10^7 squares: summation orders differ by ~1e-6
    # relative, and so does the coefficient. float32 shards then differ by that too; bf16
    # shards are rounded after the scaling, so a coefficient 1e-6 away flips some of them
    # to the neighbouring bf16 value, up to 2^-7 relative (the tolerance also applies to the
    # norm there). Every tensor holds an equal share of the norm², so a missing tensor
    # moves the norm by ~9% and a missing rank by ~1/(2W) or more.
    tolerances={
        "float32": Tolerance(atol=0.0, rtol=1e-5),
        "bfloat16": Tolerance(atol=0.0, rtol=2**-7),
    },
    dev_cases=(
        # H = 12 at W = 8: norm's rows are 2, 2, 2, 2, 2, 2, 0, 0; gate (5 rows) is empty on
        # rank 3 at W = 4 and on ranks 5-7 at W = 8. Norm ~3x max_norm: clipped.
        Case("dev-fp32", "float32", {"hidden": 12, "ffn": 20, "gate": 5, "norm_pct": 300}),
        Case("dev-bf16", "bfloat16", {"hidden": 16, "ffn": 24, "gate": 1, "norm_pct": 300}),
        # Norm ~half of max_norm: the coefficient clamps to 1 and nothing changes.
        Case("dev-unclipped", "float32", {"hidden": 12, "ffn": 20, "gate": 1, "norm_pct": 50}),
    ),
    eval_cases=(
        # A TinyLlama-sized block (51M float32 gradient elements in all) and a larger one
        # (79M bf16 elements); the gate lives on rank 0 alone.
        Case("demo-fp32", "float32", {"hidden": 2048, "ffn": 5632, "gate": 1, "norm_pct": 200}),
        Case("demo-bf16", "bfloat16", {"hidden": 2560, "ffn": 6912, "gate": 1, "norm_pct": 200}),
    ),
)
