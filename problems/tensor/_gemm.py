"""Weights and tolerances shared by the tensor-parallel GEMM problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch

from problems.spec import InputContext, Tolerance


def weight(ctx: InputContext, fan_in: int, *shape: int, shared: bool = False) -> torch.Tensor:
    """N(0, 1/fan_in) entries, as a layer is initialised: every output then has unit scale.

    Unit-scale outputs let one tolerance per dtype hold for every size of a problem; with
    unscaled N(0, 1) weights an output of a K-long dot product grows like sqrt(K).
    Drawn in float32, scaled, then cast, so the rounding to the case's dtype happens once.
    """
    drawn = ctx.randn(*shape, shared=shared, dtype=torch.float32)
    return (drawn * fan_in**-0.5).to(ctx.dtype)


# One GEMM whose output is rounded to the dtype once, maybe plus a bias. Two correct
# kernels differ by a different fp32 accumulation order (float32: ~sqrt(K)·2^-24 relative,
# far below 1e-4 for K in the thousands; no TF32) and, in bf16, by one final rounding
# each: 2^-8 relative. A bias added after the rounded GEMM (the reference) rounds once
# more, at the GEMM's scale: up to 2^-9·5 = 0.01 absolute where bias and product cancel,
# which a fused epilogue does not see. Outputs have unit scale, so a wrong tile or a
# missing chunk is off by ~1.
GEMM: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
}

# GEMM partials, then a sum over ranks in the dtype (NCCL adds bf16 pairs and rounds each
# partial sum). Partials have scale 1/sqrt(W) and partial sums reach |4..8| in the tail of
# millions of elements, where half a bf16 ulp is 2^-6; up to W-1 = 7 such roundings on
# each side of the comparison give a worst case near 2^-4. A missing or doubled rank moves
# an output by ~1/sqrt(W) >= 0.35, which this still catches on almost every element.
# Measured on the CPU at W = 8, K = 4096, 2M outputs, bf16 sums in ring order: worst error
# 0.041 against float64 (0.35 of this tolerance), and 0.45 of it between two summation
# orders.
GEMM_THEN_SUM: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "bfloat16": Tolerance(atol=0.0625, rtol=2e-2),
}
