from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM_THEN_SUM, weight


def solution(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    rows = w.shape[0]
    start = dist.get_rank() * rows
    y = x[:, start : start + rows] @ w
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y


def make_inputs(case: Case, ctx: InputContext) -> dict:
    b, k, n, world_size = case.params["b"], case.params["k"], case.params["n"], ctx.world_size
    return {"x": ctx.randn(b, k, shared=True), "w": weight(ctx, k, k // world_size, n)}


def bytes_moved(case: Case, world_size: int) -> int:
    # An all-reduce of the [B, N] partials: each rank sends 2(W-1)/W of them. A few KiB
    # to a few hundred KiB, so the floor is tiny and latency decides the time.
    b, n = case.params["b"], case.params["n"]
    return 2 * (world_size - 1) * b * n * case.itemsize // world_size


PROBLEM = Problem(
    slug="tp-decode-gemv",
    title="Decode-step row-parallel GEMV + all-reduce",
    category=Category.TENSOR,
    description=(
        "A row-parallel projection during autoregressive decoding (the output or down "
        "projection of a tensor-parallel inference engine), where only a few tokens are "
        "in flight. Every rank holds the same `x` `[B, K]`, B between 1 and 8; rank r "
        "holds `w` `[K/W, N]`, rows `[r*K/W, (r+1)*K/W)` of the weight, and uses the "
        "matching columns of `x`. Every rank returns `x @ W`, shape `[B, N]`: the sum "
        "over ranks of `x[:, rows of r] @ w_r`.\n\n"
        "The reference slices `x`, runs the skinny GEMM and calls "
        "`torch.distributed.all_reduce` on the `[B, N]` partial. The local work is bound "
        "by reading the weight shard from HBM; the exchange is only 2(W-1)/W·B·N elements "
        "per rank, so its cost is latency: a launch, a synchronisation and a few small "
        "transfers. A kernel can fuse the GEMV with a one-shot all-reduce (each rank "
        "writes its partial into every peer's symmetric buffer, signals, and sums the W "
        "partials in fp32)."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM_THEN_SUM,
    dev_cases=(
        Case("dev-fp32", "float32", {"b": 1, "k": 128, "n": 96}),
        Case("dev-bf16", "bfloat16", {"b": 4, "k": 256, "n": 192}),
    ),
    eval_cases=(
        Case("demo-b1", "bfloat16", {"b": 1, "k": 8192, "n": 8192}),
        Case("demo-b8", "bfloat16", {"b": 8, "k": 28672, "n": 8192}),
    ),
)
