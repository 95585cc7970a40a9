from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.fsdp._mesh import pair_group, stride_group
from problems.fsdp._shards import (
    chunk_rows,
    clip_in_place,
    draw_grad_shard,
    equal_share_std,
    sum_of_squares,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance

DENSE = ("wqkv", "wo", "norm", "router")
EXPERT = ("w13", "w2")


def dense_shapes(hidden: int, experts: int) -> list[tuple[int, ...]]:
    h = hidden
    return [(3 * h, h), (h, h), (h,), (experts, h)]


def expert_shapes(hidden: int, ffn: int, experts: int) -> list[tuple[int, ...]]:
    """One expert set's stacked weights: the E/2 experts of one expert-parallel rank."""
    return [(experts // 2, 2 * ffn, hidden), (experts // 2, hidden, ffn)]


def solution(
    wqkv: torch.Tensor,
    wo: torch.Tensor,
    norm: torch.Tensor,
    router: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    max_norm: float,
) -> tuple[torch.Tensor, ...]:
    dense, expert = (wqkv, wo, norm, router), (w13, w2)
    dense_sq = sum_of_squares(dense, wqkv.device)
    expert_sq = sum_of_squares(expert, wqkv.device)
    # Dense shards partition the dense gradients over all W ranks.
    dist.all_reduce(dense_sq, op=dist.ReduceOp.SUM)
    # Expert shards partition one expert set over its expert-data-parallel group (the
    # ranks of one parity); the expert-parallel pair then adds the two sets.
    dist.all_reduce(expert_sq, op=dist.ReduceOp.SUM, group=stride_group())
    dist.all_reduce(expert_sq, op=dist.ReduceOp.SUM, group=pair_group())
    total_norm = (dense_sq + expert_sq).sqrt()[0]
    clip_in_place((*dense, *expert), total_norm, max_norm)
    return (total_norm, *dense, *expert)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p, world_size, rank = case.params, ctx.world_size, ctx.rank
    dense = dense_shapes(p["hidden"], p["experts"])
    expert = expert_shapes(p["hidden"], p["ffn"], p["experts"])
    # Every distinct tensor (4 dense, 2 per expert set) gets an equal share of the norm²;
    # the total is near norm_pct% of max_norm (1.0).
    tensors, target = len(dense) + 2 * len(expert), p["norm_pct"] / 100
    inputs = {}
    for name, shape in zip(DENSE, dense, strict=True):
        std = equal_share_std(target, math.prod(shape), tensors)
        inputs[name] = draw_grad_shard(ctx, shape, world_size, rank, std)
    for name, shape in zip(EXPERT, expert, strict=True):
        std = equal_share_std(target, math.prod(shape), tensors)
        inputs[name] = draw_grad_shard(ctx, shape, world_size // 2, rank // 2, std)
    return {**inputs, "max_norm": 1.0}


def bytes_moved(case: Case, world_size: int) -> int:
    # The sums of squares: one float32 all-reduced over all ranks would do (every element
    # lives on one rank): 2(W-1)/W of 4 bytes.
    return 2 * (world_size - 1) * 4 // world_size


def empty_shards(case: Case, world_size: int) -> list[tuple[str, int]]:
    """(tensor, rank) pairs whose shard has no rows: for the tests."""
    p = case.params
    found = [
        (name, rank)
        for name, shape in zip(DENSE, dense_shapes(p["hidden"], p["experts"]), strict=True)
        for rank in range(world_size)
        if chunk_rows(shape[0], world_size, rank) == 0
    ]
    experts = p["experts"] // 2
    found += [
        (name, rank)
        for name in EXPERT
        for rank in range(world_size)
        if chunk_rows(experts, world_size // 2, rank // 2) == 0
    ]
    return found


PROBLEM = Problem(
    slug="fsdp-clip-grad-norm-expert",
    title="Global-norm gradient clipping with a separate expert-data-parallel group",
    category=Category.FSDP,
    description=(
        "Gradient clipping in a mixture-of-experts model trained with FSDP and expert "
        "parallelism (Megatron-LM and DeepSpeed MoE, torchtitan): dense parameters are "
        "sharded over all W ranks, expert parameters only over the ranks that hold the "
        "same experts, and one global norm over every distinct gradient element scales "
        "all of them. Layout: E experts (the int-valued case param `experts`, even) in two "
        "expert-parallel sets; rank r holds set e = r % 2, experts `[e·E/2, (e+1)·E/2)`; "
        "the expert-parallel (EP) group of r is the pair {2k, 2k+1} containing it, and "
        "its expert-data-parallel (EDP) group is the W/2 ranks of its parity, in which r "
        "has index d = r // 2 (at W = 2 each EDP group is one rank). Every tensor is "
        "sharded on dim 0 as FSDP2 does (torch.chunk: with R rows over P parts and "
        "c = ceil(R/P), part i is rows `[i·c, min((i+1)·c, R))`, so shards are ragged and "
        "some are empty).\n\n"
        "Rank r holds, in the case's dtype: the dense gradient shards, part r of W, of "
        "`wqkv` `[3H, H]`, `wo` `[H, H]`, `norm` `[H]` and `router` `[E, H]`; the expert "
        "gradient shards, part d of W/2, of its set's `w13` `[E/2, 2F, H]` and `w2` "
        "`[E/2, H, F]` (sharded on the expert dim; the two sets are different tensors); "
        "and the float `max_norm`. Every rank returns `(total_norm, wqkv, wo, norm, router, "
        "w13, w2)`: `total_norm` a 0-dim float32 tensor, then its six shards, scaled.\n\n"
        "`total_norm = sqrt(Σ g²)` over every element of the dense tensors and of both "
        "expert sets, each counted once: each element converted to float32, squared and "
        "summed in float32 (any order). The clip coefficient is "
        "`min(1, max_norm / (total_norm + 1e-6))` in float32, and every shard, dense and "
        "expert, is multiplied by it in place (in float32, rounded to the dtype once). The "
        "returned shards must be the input tensors, scaled in place: that is what the "
        "optimizer sees, though the judge compares the returned values.\n\n"
        "The reference sums each kind's squares locally, all-reduces the dense sum over "
        "all W ranks and the expert sum over the EDP group (giving one set's sum) and then "
        "over the EP pair (adding the two sets), and scales with `mul_`. Since every "
        "distinct element lives on exactly one rank, one all-reduce of each rank's total "
        "over all W ranks gives the same number: a kernel can sum both kinds in one "
        "launch, exchange one float per rank through symmetric memory with a flag "
        "instead of three collectives, and scale in a second launch."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # As fsdp-clip-grad-norm: float32 sums of ~10^7 squares differ by ~1e-6 relative with
    # the order; bf16 shards rounded after scaling flip to a neighbour (2^-7 relative). Every
    # distinct tensor holds an equal share of the norm², so leaving out an expert set or
    # counting one twice moves the norm by ~12%.
    tolerances={
        "float32": Tolerance(atol=0.0, rtol=1e-5),
        "bfloat16": Tolerance(atol=0.0, rtol=2**-7),
    },
    dev_cases=(
        # 6 experts, 3 per set: the expert shards are 2, 1 at W = 4 and 1, 1, 1, 0 at W = 8
        # (ranks 6 and 7 hold no expert rows); the router's 6 rows leave rank 3 empty at
        # W = 4. Norm ~3x max_norm: clipped.
        Case("dev-fp32", "float32", {"hidden": 8, "ffn": 12, "experts": 6, "norm_pct": 300}),
        Case("dev-bf16", "bfloat16", {"hidden": 16, "ffn": 8, "experts": 4, "norm_pct": 300}),
        Case("dev-unclipped", "float32", {"hidden": 8, "ffn": 12, "experts": 6, "norm_pct": 50}),
    ),
    eval_cases=(
        # Fine-grained experts (DeepSeekMoE-like sizes): 86M gradient elements in all.
        Case(
            "demo-8-experts",
            "float32",
            {"hidden": 2048, "ffn": 1408, "experts": 8, "norm_pct": 200},
        ),
        # 6 experts: empty expert shards on ranks 6 and 7 at W = 8, an empty router shard
        # at W = 4 and 8.
        Case(
            "demo-6-experts-bf16",
            "bfloat16",
            {"hidden": 2048, "ffn": 1408, "experts": 6, "norm_pct": 200},
        ),
    ),
)
