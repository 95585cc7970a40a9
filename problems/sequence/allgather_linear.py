from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    full = x.new_empty(world_size * x.shape[0], x.shape[1])
    dist.all_gather_into_tensor(full, x)
    return full @ weight


def make_inputs(case: Case, ctx: InputContext) -> dict:
    t, h, f = case.params["t"], case.params["h"], case.params["f"]
    # Scaled like an initialised layer so outputs are of order one whatever H is.
    weight = ctx.randn(h, f // ctx.world_size, dtype=torch.float32) * h**-0.5
    return {"x": ctx.randn(t // ctx.world_size, h), "weight": weight.to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r's output block from peer j is x_j @ W_r, [T/W, F/W]; r must learn either x_j
    # ([T/W, H]) or that product, so each rank receives at least (W-1)·(T/W)·min(H, F/W)
    # elements. With F/W >= H (every demo case at W <= 4) that is the all-gather.
    t, h, f = case.params["t"], case.params["h"], case.params["f"]
    return (world_size - 1) * (t // world_size) * min(h, f // world_size) * case.itemsize


PROBLEM = Problem(
    slug="sp-allgather-linear",
    title="Sequence parallel: all-gather + column-parallel GEMM",
    category=Category.SEQUENCE,
    description=(
        "The entry of a column-parallel GEMM (QKV or MLP up-projection) under Megatron-style "
        "sequence parallelism: the activations arrive split along the sequence and leave "
        "split along the output features. Every rank holds `x` `[T/W, H]`, its sequence "
        "block (rows `[r*T/W, (r+1)*T/W)`), and `weight` `[H, F/W]`, its own column shard "
        "of the layer's weight (different on every rank).\n\n"
        "Rank r returns `cat(x_0, ..., x_{W-1}) @ weight` `[T, F/W]` in the input dtype "
        "(float32 accumulation).\n\n"
        "The reference calls `torch.distributed.all_gather_into_tensor` and then one "
        "`torch.matmul`, so the GEMM waits for the whole gather. Each rank must receive "
        "the W-1 peers' blocks, (W-1)·(T/W)·H elements. A faster kernel overlaps the two: "
        "it multiplies its own block while the first peer's block arrives over symmetric "
        "memory, then each peer block as it lands (the all-gather/GEMM overlap of "
        "TransformerEngine and async tensor parallelism)."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances={
        # Dot products of length H in float32, summed in another order.
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        # Outputs of order one rounded to bf16: one ulp is at most 2^-7 relative, and a
        # different float32 accumulation order may tip the rounding.
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 16, "h": 32, "f": 64}),
        Case("dev-bf16", "bfloat16", {"t": 32, "h": 64, "f": 128}),
    ),
    eval_cases=(
        Case("demo-8k-h2048", "bfloat16", {"t": 8192, "h": 2048, "f": 8192}),
        Case("demo-8k-h4096", "bfloat16", {"t": 8192, "h": 4096, "f": 16384}),
    ),
)
