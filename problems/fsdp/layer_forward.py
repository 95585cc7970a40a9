from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.fsdp._linear import draw_flat_shard, flat_numel, unflatten
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(flat_shard: torch.Tensor, x: torch.Tensor, out_features: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    flat = flat_shard.new_empty(world_size * flat_shard.numel())
    dist.all_gather_into_tensor(flat, flat_shard)
    weight, bias = unflatten(flat, out_features, x.shape[1])
    return F.linear(x, weight, bias)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n = case.params["m"], case.params["k"], case.params["n"]
    return {
        # N(0, 1/K) weights (the usual initialisation) and unit activations give outputs
        # of unit scale whatever K; unit biases keep the bias visible in them.
        "flat_shard": draw_flat_shard(ctx, n, k, weight_std=k**-0.5, bias_std=1.0),
        "x": ctx.randn(m, k),
        "out_features": n,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # The parameter all-gather: each rank's F/W elements go to its W-1 peers. The
    # activations and the output never leave their rank.
    n, k = case.params["n"], case.params["k"]
    return (world_size - 1) * flat_numel(n, k, world_size) // world_size * case.itemsize


PROBLEM = Problem(
    slug="fsdp-layer-forward",
    title="FSDP linear layer forward: flat-parameter all-gather, then x·Wᵀ + b",
    category=Category.FSDP,
    description=(
        "The forward pass of a linear layer wrapped by PyTorch FSDP (FULL_SHARD, as FSDP1's "
        "flat parameter holds it): no rank holds the layer's parameters, only its 1/W of "
        "one flat parameter, which is all-gathered just before the layer runs. The flat "
        "parameter of a layer with `weight` `[N, K]` and `bias` `[N]` holds the weight "
        "row-major (element n·K + k is weight[n, k]), then the bias (element N·K + n is "
        "bias[n]), then zeros up to F = N·K + N rounded up to a multiple of W. Rank r holds "
        "`flat_shard` `[F/W]`, elements `[r·F/W, (r+1)·F/W)` of it, its own batch of "
        "activations `x` `[M, K]` (both in the case's dtype), and the int `out_features` "
        "N (K is x's width). Every rank returns `y = x @ weightᵀ + bias` `[M, N]` in the "
        "dtype, accumulated in float32 and rounded to the dtype once (adding the bias after "
        "a rounded GEMM, as the reference may on some backends, is within the "
        "tolerance).\n\n"
        "The reference calls `all_gather_into_tensor` to rebuild the flat parameter, takes "
        "views of it as weight and bias, and calls `torch.nn.functional.linear`. Only the "
        "parameter crosses the links: each rank sends its F/W elements to W−1 peers, and "
        "the GEMM cannot start before the gather ends. A kernel can pull the peers' weight "
        "shards over symmetric memory tile by tile as the GEMM needs them (the shard "
        "boundaries are rows of the weight, or a partial row), so that communication and "
        "computation overlap and no gathered copy is ever materialised."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # One GEMM with a bias, rounded to the dtype once. float32: accumulation order, ~1e-6
    # of values of unit scale (no TF32). bfloat16: one rounding of 2^-8 relative each side,
    # plus a second rounding (up to 2^-9 of |x·Wᵀ| ≤ ~5) where the bias is added after a
    # rounded GEMM. A wrong shard or a missing bias is off by ~1.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    dev_cases=(
        # F = 36 elements: padded to 40 at W = 8, whose last rank holds 1 bias element and
        # 4 zeros.
        Case("dev-fp32", "float32", {"m": 8, "k": 5, "n": 6}),
        Case("dev-bf16", "bfloat16", {"m": 32, "k": 48, "n": 40}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"m": 4096, "k": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"m": 2048, "k": 8192, "n": 8192}),
    ),
)
