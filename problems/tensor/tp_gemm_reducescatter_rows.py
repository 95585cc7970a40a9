from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM_THEN_SUM, weight


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    partial = a @ b
    out = partial.new_empty(partial.shape[0] // dist.get_world_size(), partial.shape[1])
    dist.reduce_scatter_tensor(out, partial, op=dist.ReduceOp.SUM)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n, w = case.params["m"], case.params["k"], case.params["n"], ctx.world_size
    return {"a": ctx.randn(m, k // w), "b": weight(ctx, k, k // w, n)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r owns M/W output rows; every peer's partial of those rows must reach it
    # (or be summed on the way): each rank sends (W-1)·(M/W)·N elements.
    m, n = case.params["m"], case.params["n"]
    return (world_size - 1) * (m // world_size) * n * case.itemsize


PROBLEM = Problem(
    slug="tp-gemm-reducescatter-rows",
    title="GEMM + reduce-scatter over rows (token-sharded output)",
    category=Category.TENSOR,
    description=(
        "The output side of a sequence-parallel, row-parallel linear layer (Megatron-LM's "
        "sequence parallelism, PyTorch async-TP). Rank r holds `a` `[M, K/W]`, its slice of "
        "the activations along the contraction dim, and `b` `[K/W, N]`, the matching row "
        "shard of the weight. The full product is the sum over ranks of `a_r @ b_r`; rank r "
        "returns rows `[r*M/W, (r+1)*M/W)` of it, shape `[M/W, N]` (a token shard).\n\n"
        "The reference computes the whole `[M, N]` partial product, then calls "
        "`torch.distributed.reduce_scatter_tensor`, so the communication waits for the "
        "whole GEMM. Each rank must get the (W-1) peers' partials of its own M/W rows. A "
        "kernel can compute the row blocks destined to other ranks first and push (or let "
        "the owner pull) each block over symmetric memory while the next is computed, "
        "summing in fp32 at the owner."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM_THEN_SUM,
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 64, "k": 128, "n": 96}),
        Case("dev-bf16", "bfloat16", {"m": 128, "k": 256, "n": 192}),
    ),
    eval_cases=(
        Case("demo-2k", "bfloat16", {"m": 2048, "k": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"m": 8192, "k": 4096, "n": 4096}),
    ),
)
