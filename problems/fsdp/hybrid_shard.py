from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp._mesh import pair_group, stride_group
from problems.spec import Case, Category, InputContext, Problem, Tolerance

SHARD = 2  # ranks per shard group: the pairs {2k, 2k+1}


def solution(grad: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    shard = grad.new_empty(grad.numel() // SHARD)
    # Within the shard group: this rank keeps chunk r % 2 of its pair's sum.
    dist.reduce_scatter_tensor(shard, grad, op=dist.ReduceOp.SUM, group=pair_group())
    # Across replicas: the ranks holding the same chunk add their pairs' sums.
    dist.all_reduce(shard, op=dist.ReduceOp.SUM, group=stride_group())
    return shard.mul_(1.0 / world_size)  # a power of two: exact


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Each rank's own, un-reduced gradient of the whole flat parameter, of unit scale.
    return {"grad": ctx.randn(case.params["params"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # With R = W/2 replicas, rank r's result (chunk r % 2, P/2 elements) needs every rank's
    # chunk: a reduce-scatter over all W ranks into P/W pieces ((W-1)·P/W out per rank),
    # then an all-gather of the R pieces of each chunk within its replica group
    # ((R-1)·P/W). The two-level reference sends the same: (P/2 in the pair, then an
    # all-reduce of P/2 over R ranks) = (W + R - 2)·P/W elements.
    p, replicas = case.params["params"], world_size // SHARD
    return (world_size + replicas - 2) * (p // world_size) * case.itemsize


PROBLEM = Problem(
    slug="fsdp-hybrid-shard",
    title="HSDP gradient reduction: reduce-scatter in the shard group, all-reduce across replicas",
    category=Category.FSDP,
    description=(
        "The gradient reduction of hybrid sharding (PyTorch FSDP's HYBRID_SHARD, FSDP2 on a "
        "2-D (replicate, shard) mesh, DeepSpeed ZeRO++'s hierarchical partitioning): "
        "parameters and gradients are sharded within small groups, typically the GPUs "
        "linked by the fastest fabric, and replicated across groups. Shard groups are the "
        "pairs {2k, 2k+1} (shard size 2); the replica group of rank r is the W/2 ranks with "
        "the same index r % 2 in their pairs, {r % 2, r % 2 + 2, ...} (at W = 2 there is one "
        "replica). Every rank holds its own, un-reduced gradient `grad` `[P]` (the case's "
        "dtype; P even) of the flat parameter. Rank r returns its shard `[P/2]`: elements "
        "`[(r % 2)·P/2, (r % 2 + 1)·P/2)` of the average over all W ranks "
        "`(1/W)·Σ_j grad_j`, in the dtype. Sums are taken in the dtype (in bf16, partial "
        "sums are rounded), in any order; the division by W (a power of two) is exact.\n\n"
        "The reference reduce-scatters (sum) within the pair with `reduce_scatter_tensor`, "
        "all-reduces the `[P/2]` result over the replica group, and scales by 1/W; the "
        "process groups are created once with `dist.new_group`, every rank creating every "
        "group in the same order. The result on a rank depends on every rank's gradient "
        "chunk: each rank must send at least (W−1)·P/W elements for a W-way reduce-scatter "
        "plus (W/2 − 1)·P/W to share the reduced pieces within its replica group, which is "
        "what the two-level reference sends. On one NVLink node all ranks are equally "
        "near, so a symmetric-memory kernel can skip the hierarchy: each rank reads its "
        "P/W piece from all W peers, adds, and writes the sum into the W/2 replicas of its "
        "chunk, in one launch."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Averages of W unit-scale addends summed in another order: float32 differs by a few
    # ulps. In bf16 the W-1 rounded partial sums reach |~8| at worst (half an ulp 2^-6
    # there); after the 1/W scaling two orders differ by well under 2^-5. A missing or
    # doubled rank moves an average by ~1/W of a unit-scale addend.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=2**-5, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"params": 1000}),
        Case("dev-bf16", "bfloat16", {"params": 4096}),
    ),
    eval_cases=(
        Case("demo-32m-fp32", "float32", {"params": 1 << 25}),
        Case("demo-64m-bf16", "bfloat16", {"params": 1 << 26}),
    ),
)
