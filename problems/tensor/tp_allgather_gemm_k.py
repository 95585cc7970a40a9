from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem
from problems.tensor._gemm import GEMM, weight


def solution(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    gathered = x.new_empty(world_size * x.shape[0], x.shape[1])
    dist.all_gather_into_tensor(gathered, x)
    return gathered.t() @ grad_out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    t, h, n, w = case.params["t"], case.params["h"], case.params["n"], ctx.world_size
    return {"x": ctx.randn(t // w, h), "grad_out": weight(ctx, t, t, n // w)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every rank contracts over all T tokens of X; its own T/W rows must reach each of
    # the W-1 peers: (W-1)·(T/W)·H elements.
    t, h = case.params["t"], case.params["h"]
    return (world_size - 1) * (t // world_size) * h * case.itemsize


PROBLEM = Problem(
    slug="tp-allgather-gemm-k",
    title="All-gather + GEMM over the gathered contraction dim (weight gradient)",
    category=Category.TENSOR,
    description=(
        "The weight gradient of a sequence-parallel, column-parallel linear layer: the "
        "second all-gather + GEMM layout of Megatron-LM's backward pass, where the gathered "
        "dimension is the GEMM's contraction dimension. Rank r holds `x`, rows "
        "`[r*T/W, (r+1)*T/W)` of the layer input X `[T, H]` (a token shard), and "
        "`grad_out`, the output gradient of its own column shard for all tokens, "
        "`[T, N/W]`. Every rank returns `X^T @ grad_out`, shape `[H, N/W]`: the gradient "
        "of its weight shard (weights stored `[in, out]`, so `y = x @ w`).\n\n"
        "The reference all-gathers X with `torch.distributed.all_gather_into_tensor` and "
        "runs one GEMM over all T tokens. Each rank must receive the other ranks' "
        "(W-1)·T/W rows of X. Unlike the row layout (`tp-allgather-gemm-rows`), where each "
        "arriving chunk fills its own block of output rows, here every chunk j contributes "
        "`x_j^T @ grad_out[j-th T/W rows]` to the whole output: a kernel that overlaps the "
        "gather with the GEMM splits the contraction into W steps and accumulates each "
        "step's product (in fp32) into the same output tile as the chunks arrive."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=GEMM,
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 128, "h": 64, "n": 96}),
        Case("dev-bf16", "bfloat16", {"t": 256, "h": 128, "n": 192}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"t": 4096, "h": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"t": 8192, "h": 4096, "n": 4096}),
    ),
)
