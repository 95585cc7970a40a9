from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    local = x @ weight
    gathered = local.new_empty((world_size * local.shape[0], local.shape[1]))
    dist.all_gather_into_tensor(gathered, local)
    # [W*B, N/W] -> [B, W, N/W]: rank r's columns land at [r*N/W, (r+1)*N/W).
    return gathered.view(world_size, *local.shape).transpose(0, 1).reshape(x.shape[0], -1)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    batch, k, n = case.params["b"], case.params["k"], case.params["n"]
    # The activation is replicated; each rank holds its own column block of the weight,
    # scaled so the outputs are of order 1.
    weight = ctx.randn(k, n // ctx.world_size, dtype=torch.float32) * k**-0.5
    return {"x": ctx.randn(batch, k, shared=True), "weight": weight.to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's [B, N/W] slice of the output must reach the W-1 peers.
    p = case.params
    return (world_size - 1) * p["b"] * (p["n"] // world_size) * case.itemsize


PROBLEM = Problem(
    slug="tp-decode-gemv-gather",
    title="Column-parallel decode GEMV with all-gather",
    category=Category.TENSOR,
    description=(
        "A column-parallel linear layer at decode time, followed by gathering its output "
        "(as for an LM head or a layer whose consumer is not sharded). Every rank holds the "
        "same activation `x` (`[B, K]`, B from 1 to 8 tokens) and its column block of the "
        "weight `weight` (`[K, N/W]`, columns `[r*N/W, (r+1)*N/W)` of the full `[K, N]`). "
        "Every rank returns the full `x @ W_full` (`[B, N]`, input dtype, float32 "
        "accumulation).\n\n"
        "The reference runs `x @ weight`, `torch.distributed.all_gather_into_tensor` on the "
        "`[B, N/W]` results and a permute into column order. The GEMV is bound by reading "
        "the weight from HBM; the exchange is only `B*N/W` elements per rank, so NCCL's "
        "launch and synchronisation latency dominates it. A fused kernel can write each "
        "output tile straight into every peer's `[B, N]` buffer as it finishes, overlapping "
        "the exchange with the weight stream."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Dot products of K terms summed in another order (split-K, other tiles): a few
    # float32 roundings of outputs of size ~1. bfloat16 adds one rounding of the output
    # to 8 significant bits: neighbouring values differ by up to 2^-7 relative.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=1.6e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"b": 3, "k": 96, "n": 128}),
        Case("dev-bf16", "bfloat16", {"b": 1, "k": 256, "n": 64}),
    ),
    eval_cases=(
        Case("demo-b1", "bfloat16", {"b": 1, "k": 4096, "n": 14336}),
        Case("demo-b8", "bfloat16", {"b": 8, "k": 8192, "n": 28672}),
    ),
)
