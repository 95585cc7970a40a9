"""The AdamW shard update and the optimizer-state draws shared by fsdp-zero1-adam and
fsdp-zero2-adam.

Not a problem module (it defines no PROBLEM); the registry skips it. A problem's version
covers it (problems.spec hashes the catalog modules a problem uses).
"""

from __future__ import annotations

import math

import torch

from problems.spec import Case, InputContext, Tolerance

# Hyperparameters of a typical LLM pretraining run, passed to solutions as Python numbers.
HYPER = {"lr": 3e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
PARAM_STD = 0.02  # master weights at their usual initialisation scale
# Gradients of 1e-3 put sqrt(v) near 1e-3, so eps (1e-8) moves the update by ~1e-5 of
# itself: a misplaced eps is seen at the float32 tolerance below.
GRAD_STD = 1e-3

# The update is computed in float64 and rounded to float32 once: two correct kernels
# differ only where their float64 results (~1e-16 apart) straddle a float32 rounding
# boundary, about once in 10^8 elements, and then by one float32 ulp (2^-24 to 2^-23
# relative). 2^-22 accepts two. The bf16 parameters are rounded from the float32 master, so
# they differ only where that rare ulp also straddles a bf16 boundary: in effect exact. A
# missing weight decay moves the master by lr·wd = 3e-5 relative, eps by ~1e-5 of the
# update, a float32 (instead of float64) update or gradient average by ~1e-7 relative:
# every one of them fails.
STATE_TOLERANCES = {"float32": Tolerance(atol=0.0, rtol=2**-22)}


def adamw_fp64(
    master: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    grad: torch.Tensor,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
) -> torch.Tensor:
    """AdamW on one shard in torch.optim.AdamW's order, in float64; updates the float32
    state in place (copy_ rounds to nearest even) and returns the new bf16 parameters."""
    g = grad.double()
    p = master.double() * (1.0 - lr * weight_decay)
    m = exp_avg.double() * beta1 + g * (1.0 - beta1)
    v = exp_avg_sq.double() * beta2 + g * g * (1.0 - beta2)
    bias1 = 1.0 - beta1**step
    bias2 = 1.0 - beta2**step
    denom = v.sqrt() / math.sqrt(bias2) + eps
    p = p - (lr / bias1) * m / denom
    master.copy_(p)
    exp_avg.copy_(m)
    exp_avg_sq.copy_(v)
    return master.to(torch.bfloat16)


def draw_state(case: Case, ctx: InputContext) -> dict:
    """Everything but the gradient: full bf16 params, this rank's float32 state shard, the
    hyperparameters and the step (drawn per trial in [1, max_step], agreed by all ranks)."""
    total, world_size, rank = case.params["params"], ctx.world_size, ctx.rank
    n = total // world_size
    # The master weights are one shared draw, so params is bf16(master) on every shard.
    full = ctx.randn(total, shared=True, dtype=torch.float32) * PARAM_STD
    # Adam's moments as after some steps: m ~ 0.3·|g|, v ~ g² (a mean-1 exponential times
    # GRAD_STD², so no element's v is 0).
    a, b = (ctx.randn(n, dtype=torch.float32) for _ in range(2))
    return {
        "params": full.to(torch.bfloat16),
        "master": full[rank * n : (rank + 1) * n].clone(),
        "exp_avg": ctx.randn(n, dtype=torch.float32) * (0.3 * GRAD_STD),
        "exp_avg_sq": (a * a + b * b) * (GRAD_STD**2 / 2),
        **HYPER,
        "step": 1 + ctx.choice(case.params["max_step"]),
    }
