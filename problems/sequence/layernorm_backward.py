from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

EPS = 1e-5


def solution(
    x: torch.Tensor, dy: torch.Tensor, gamma: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x32, dy32 = x.float(), dy.float()
    mean = x32.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x32.var(-1, unbiased=False, keepdim=True) + EPS)
    xhat = (x32 - mean) * rstd
    g = dy32 * gamma.float()
    dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    # One all-reduce for both parameter gradients: each rank saw only its sequence block.
    grads = torch.stack([(dy32 * xhat).sum(0), dy32.sum(0)])
    dist.all_reduce(grads, op=dist.ReduceOp.SUM)
    return dx.to(x.dtype), grads[0], grads[1]


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows, h = case.params["t"] // ctx.world_size, case.params["h"]
    x = ctx.randn(rows, h, dtype=torch.float32)
    # dy has a nonzero mean and a part along x, and gamma sits around 1, so the two
    # correction terms of dx are of order one: a kernel that drops either one fails.
    dy = ctx.randn(rows, h, dtype=torch.float32) + 0.5 + 0.5 * x
    gamma = 1 + 0.25 * ctx.randn(h, shared=True, dtype=torch.float32)
    return {"x": x.to(ctx.dtype), "dy": dy.to(ctx.dtype), "gamma": gamma.to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Only dgamma and dbeta cross the links: an all-reduce of 2·H float32 values, whose
    # bandwidth-optimal bound is 2(W-1)/W of the buffer per rank.
    buffer = 2 * case.params["h"] * 4
    return 2 * (world_size - 1) * buffer // world_size


PROBLEM = Problem(
    slug="sp-layernorm-backward",
    title="Sequence parallel: LayerNorm backward",
    category=Category.SEQUENCE,
    description=(
        "LayerNorm's backward pass where the activations are split along the sequence "
        "(Megatron sequence parallelism) and the LayerNorm parameters are replicated. "
        "Every rank holds `x` and `dy`, `[T/W, H]`, the input and output gradient of its "
        "own tokens, and `gamma` `[H]` (the same on every rank). LayerNorm uses eps = 1e-5 "
        "and the biased variance; mean and rstd are recomputed from `x`.\n\n"
        "With `xhat = (x - mean) * rstd` and `g = dy * gamma`, rank r returns\n"
        "`dx = rstd * (g - mean(g, -1) - xhat * mean(g * xhat, -1))` `[T/W, H]` in the "
        "input dtype, and `dgamma = sum(dy * xhat)`, `dbeta = sum(dy)` `[H]` in float32, "
        "summed over the whole sequence, i.e. over every rank's tokens (float32 main "
        "gradients, as with Megatron's gradient-accumulation fusion). All arithmetic is "
        "float32.\n\n"
        "The reference computes everything with PyTorch ops in float32 and sums the "
        "parameter gradients with one `torch.distributed.all_reduce` of a `[2, H]` "
        "buffer. Only those 2·H floats cross the links, so the problem is bound by the "
        "local pass over `x` and `dy` plus the latency of a tiny all-reduce: a fast "
        "kernel reads `x` and `dy` once, writes `dx` once, reduces the column sums "
        "across its blocks and pushes them to every peer over symmetric memory."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances={
        # float32 throughout: sums of T terms in another order differ by ~T·2^-24 of the
        # sum of magnitudes.
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        # dx is rounded to bf16 (one ulp is 2^-8 relative, and float32 differences may tip
        # the rounding); dgamma/dbeta are float32 sums of terms computed from bf16 inputs.
        "bfloat16": Tolerance(atol=2e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 16, "h": 64}),
        Case("dev-bf16", "bfloat16", {"t": 32, "h": 256}),
    ),
    eval_cases=(
        Case("demo-4k-h4096", "bfloat16", {"t": 4096, "h": 4096}),
        Case("demo-16k-h4096", "bfloat16", {"t": 16384, "h": 4096}),
    ),
)
