from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp._linear import draw_flat_shard, flat_numel, unflatten
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    flat_shard: torch.Tensor, x: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    n, k = grad_out.shape[1], x.shape[1]
    flat = flat_shard.new_empty(world_size * flat_shard.numel())
    dist.all_gather_into_tensor(flat, flat_shard)
    weight, _ = unflatten(flat, n, k)
    grad_input = grad_out @ weight
    # As autograd leaves them: in the dtype, each accumulated in float32 and rounded once.
    grad_weight = grad_out.T @ x
    grad_bias = grad_out.sum(dim=0)
    # FSDP's reduce_dtype=float32: the flat gradient (padding included) is reduce-scattered
    # in float32 and averaged over ranks.
    flat_grad = torch.zeros(flat.numel(), dtype=torch.float32, device=flat.device)
    flat_grad[: n * k] = grad_weight.flatten()
    flat_grad[n * k : n * k + n] = grad_bias
    grad_shard = flat_grad.new_empty(flat_shard.numel())
    dist.reduce_scatter_tensor(grad_shard, flat_grad, op=dist.ReduceOp.SUM)
    grad_shard.mul_(1.0 / world_size)  # W is a power of two: exact
    return grad_input, grad_shard


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n = case.params["m"], case.params["k"], case.params["n"]
    # Scaled so that every output has unit scale, which one tolerance per dtype needs:
    # grad_out ~ N(0, 1/M) makes each rank's weight and bias gradients (sums over M tokens)
    # unit, and weights ~ N(0, M/N) then make grad_input (a sum over N) unit. The biases
    # play no part in the backward pass.
    return {
        "flat_shard": draw_flat_shard(ctx, n, k, weight_std=(m / n) ** 0.5, bias_std=1.0),
        "x": ctx.randn(m, k),
        "grad_out": (ctx.randn(m, n, dtype=torch.float32) * m**-0.5).to(ctx.dtype),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # The parameter all-gather (F/W elements to each of W-1 peers) and the gradient
    # reduce-scatter. The local weight and bias gradients are values of the dtype, so a
    # one-shot reduce-scatter may send them in the dtype and add in float32 on arrival:
    # W-1 chunks of F/W elements of the dtype leave each rank.
    n, k = case.params["n"], case.params["k"]
    return 2 * (world_size - 1) * flat_numel(n, k, world_size) // world_size * case.itemsize


PROBLEM = Problem(
    slug="fsdp-layer-backward",
    title="FSDP linear layer backward: all-gather, input and weight gradients, reduce-scatter",
    category=Category.FSDP,
    description=(
        "The backward pass of a linear layer `y = x @ weightᵀ + bias` wrapped by PyTorch "
        "FSDP (FULL_SHARD, gradients reduced in float32 as with "
        "`MixedPrecision(reduce_dtype=torch.float32)`): the flat parameter is all-gathered "
        "again, the layer's gradients are computed for the local batch, and the flat "
        "gradient is reduce-scattered so each rank keeps the averaged gradient of its own "
        "shard. The flat parameter of a layer with `weight` `[N, K]` and `bias` `[N]` holds "
        "the weight row-major (element n·K + k is weight[n, k]), then the bias (element "
        "N·K + n), then zeros up to F = N·K + N rounded up to a multiple of W. Rank r holds "
        "`flat_shard` `[F/W]` (elements `[r·F/W, (r+1)·F/W)`), the layer's saved input `x` "
        "`[M, K]` and the gradient of its output `grad_out` `[M, N]` for its own batch, all "
        "in the case's dtype. Every rank returns `(grad_input [M, K], grad_shard [F/W])`:\n"
        "- `grad_input = grad_out @ weight`, in the dtype (float32 accumulation, one "
        "rounding);\n"
        "- `grad_shard`, float32: elements `[r·F/W, (r+1)·F/W)` of the average over ranks "
        "`(1/W)·Σ_j g_j` of the flat gradients g_j, where rank j's flat gradient holds "
        "`grad_outᵀ @ x` (`[N, K]`, row-major) then `grad_out.sum(0)` (`[N]`) then zeros "
        "on the padding. Both local gradients are first rounded to the dtype, as autograd "
        "produces them (float32 accumulation, one rounding); the sum over ranks is in "
        "float32, in any order.\n\n"
        "The reference calls `all_gather_into_tensor` for the flat parameter, runs the "
        "three local products in the dtype, writes the flat float32 gradient and calls "
        "`reduce_scatter_tensor` (sum), then scales by 1/W (exact: W is a power of two). "
        "Each rank must send its F/W parameter elements to W−1 peers and W−1 chunks of its "
        "local gradient; those are values of the dtype, so a one-shot reduce-scatter can "
        "send them in the dtype and add in float32 where they arrive. A kernel can overlap "
        "the weight gradient GEMM with the reduce-scatter, storing each finished tile into "
        "the peer that owns it over symmetric memory, and pull the weight's shards for "
        "the input gradient tile by tile."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32: GEMM accumulation order and sums of W float32 values, ~1e-6 at unit scale
    # (no TF32). bfloat16: grad_input is one rounded GEMM (2^-8 relative each side, covered
    # by rtol). The gradient shard averages W local gradients of unit scale, each rounded to
    # bf16: two kernels whose float32 accumulation lands on neighbouring bf16 values differ
    # by one bf16 ulp of one addend (up to 2^-5 for an addend in [4, 8)) divided by W, which
    # atol covers where the average cancels to near zero. A missing or doubled rank moves an
    # element by ~1/W of unit-scale addends, far outside.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2**-5, rtol=1e-2),
    },
    dev_cases=(
        # F = 36 elements: padded to 40 at W = 8, whose last rank's gradient shard is one
        # bias element and four zeros.
        Case("dev-fp32", "float32", {"m": 8, "k": 5, "n": 6}),
        Case("dev-bf16", "bfloat16", {"m": 40, "k": 13, "n": 10}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"m": 4096, "k": 4096, "n": 4096}),
        Case("demo-8k", "bfloat16", {"m": 2048, "k": 8192, "n": 8192}),
    ),
)
