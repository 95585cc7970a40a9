from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM_THEN_SUM, weight


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    m, n = a.shape[0], b.shape[1]
    # reduce_scatter_tensor splits its input's rows into W contiguous chunks; column
    # block j must become chunk j, hence the copy into W stacked [M, N/W] blocks.
    blocks = (a @ b).view(m, world_size, n // world_size).transpose(0, 1)
    chunks = blocks.reshape(world_size * m, n // world_size)
    out = chunks.new_empty(m, n // world_size)
    dist.reduce_scatter_tensor(out, chunks, op=dist.ReduceOp.SUM)
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n, w = case.params["m"], case.params["k"], case.params["n"], ctx.world_size
    return {"a": ctx.randn(m, k // w), "b": weight(ctx, k, k // w, n)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r owns N/W output columns; every peer's partial of those columns must reach it
    # (or be summed on the way): each rank sends (W-1)·M·(N/W) elements.
    m, n = case.params["m"], case.params["n"]
    return (world_size - 1) * m * (n // world_size) * case.itemsize


PROBLEM = Problem(
    slug="tp-gemm-reducescatter-cols",
    title="GEMM + reduce-scatter over columns (feature-sharded output)",
    category=Category.TENSOR,
    description=(
        "A row-parallel GEMM whose summed output stays sharded over its features rather "
        "than its tokens, as when the next operation works on feature shards. Rank r holds "
        "`a` `[M, K/W]`, its slice of the activations along the contraction dim, and `b` "
        "`[K/W, N]`, the matching row shard of the weight. The full product is the sum "
        "over ranks of `a_r @ b_r`; rank r returns columns `[r*N/W, (r+1)*N/W)` of it, "
        "shape `[M, N/W]`.\n\n"
        "The reference computes the whole `[M, N]` partial product, copies its W column "
        "blocks into contiguous chunks (`reduce_scatter_tensor` splits along the first "
        "dim) and calls `torch.distributed.reduce_scatter_tensor`. Each rank must get the "
        "(W-1) peers' partials of its own N/W columns. The block bound for peer j is "
        "strided in the row-major product: a kernel that writes each GEMM tile straight "
        "into its owner's buffer saves the transpose copy, and can overlap the transfer "
        "of one column block with the computation of the next."
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
