from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM_THEN_SUM, weight


def solution(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    y = x @ w
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    # Added once, after the sum, as Megatron-LM's RowParallelLinear does.
    return y + bias


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n, world_size = case.params["m"], case.params["k"], case.params["n"], ctx.world_size
    return {
        "x": ctx.randn(m, k // world_size),
        "w": weight(ctx, k, k // world_size, n),
        "bias": ctx.randn(n, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # An all-reduce of the [M, N] partials: at best a reduce-scatter plus an all-gather,
    # each rank sending 2(W-1)/W of the buffer.
    m, n = case.params["m"], case.params["n"]
    return 2 * (world_size - 1) * m * n * case.itemsize // world_size


PROBLEM = Problem(
    slug="tp-gemm-allreduce",
    title="Row-parallel linear: GEMM + all-reduce + bias",
    category=Category.TENSOR,
    description=(
        "A row-parallel linear layer without sequence parallelism (Megatron-LM's "
        "RowParallelLinear: an attention output projection or an MLP down projection). "
        "Rank r holds `x` `[M, K/W]`, its slice of the activations along the contraction "
        "dim, `w` `[K/W, N]`, the matching row shard of the weight, and `bias` `[N]`, the "
        "same on every rank. Every rank returns `sum_r(x_r @ w_r) + bias`, shape `[M, N]`, "
        "the bias added once.\n\n"
        "The reference runs the local GEMM, then `torch.distributed.all_reduce` on the "
        "whole `[M, N]` partial, then adds the bias. A bandwidth-optimal all-reduce sends "
        "2(W-1)/W of the partial per rank. A kernel can split the output into tiles and "
        "reduce each tile (reading peers' partials over symmetric memory, summing in fp32, "
        "adding the bias in the same pass) while later tiles are still being computed."
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
        Case("demo-1k", "bfloat16", {"m": 1024, "k": 4096, "n": 4096}),
        Case("demo-4k", "bfloat16", {"m": 4096, "k": 4096, "n": 4096}),
    ),
)
