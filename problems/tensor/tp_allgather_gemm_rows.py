from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM, weight


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    gathered = a.new_empty(world_size * a.shape[0], a.shape[1])
    dist.all_gather_into_tensor(gathered, a)
    return gathered @ b


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n, w = case.params["m"], case.params["k"], case.params["n"], ctx.world_size
    return {"a": ctx.randn(m // w, k), "b": weight(ctx, k, k, n // w)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every rank needs all M rows of A; its own M/W rows must reach each of the W-1 peers:
    # (W-1)·(M/W)·K elements. Moving the weight shards instead would cost K·N/W per peer,
    # more for every case here (and than production's token counts).
    m, k = case.params["m"], case.params["k"]
    return (world_size - 1) * (m // world_size) * k * case.itemsize


PROBLEM = Problem(
    slug="tp-allgather-gemm-rows",
    title="All-gather + GEMM (token-sharded activations)",
    category=Category.TENSOR,
    description=(
        "The input side of a sequence-parallel, column-parallel linear layer (Megatron-LM's "
        "sequence parallelism, PyTorch async-TP). Rank r holds `a`, rows "
        "`[r*M/W, (r+1)*M/W)` of the activations A `[M, K]` (a token shard), and `b`, its "
        "column shard of the weight `[K, N/W]`. Every rank returns `A @ b`, shape "
        "`[M, N/W]`: all M tokens, its own N/W output features.\n\n"
        "The reference all-gathers A with `torch.distributed.all_gather_into_tensor`, then "
        "runs one GEMM, so the GEMM waits for the whole gather. Each rank must receive the "
        "other ranks' (W-1)·M/W rows of A; row block j of the output needs only rank j's "
        "rows, so a kernel can start on its own rows at once and compute each block as its "
        "rows arrive (peers writing straight into a symmetric-memory buffer), hiding the "
        "transfer behind the GEMM."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM,
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 64, "k": 128, "n": 96}),
        Case("dev-bf16", "bfloat16", {"m": 128, "k": 256, "n": 192}),
    ),
    eval_cases=(
        Case("demo-2k", "bfloat16", {"m": 2048, "k": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"m": 8192, "k": 4096, "n": 4096}),
    ),
)
