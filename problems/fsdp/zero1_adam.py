from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp._adam import GRAD_STD, STATE_TOLERANCES, adamw_fp64, draw_state
from problems.spec import Case, Category, InputContext, Problem


def solution(
    grad: torch.Tensor,
    params: torch.Tensor,
    master: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rank, n = dist.get_rank(), master.numel()
    # The gradient is already averaged and the same on every rank: each rank needs only
    # the slice its optimizer state covers.
    shard = adamw_fp64(
        master,
        exp_avg,
        exp_avg_sq,
        grad[rank * n : (rank + 1) * n],
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        weight_decay=weight_decay,
        step=step,
    )
    dist.all_gather_into_tensor(params, shard)
    return params, master, exp_avg, exp_avg_sq


def make_inputs(case: Case, ctx: InputContext) -> dict:
    total = case.params["params"]
    return {
        "grad": ctx.randn(total, shared=True, dtype=torch.float32) * GRAD_STD,
        **draw_state(case, ctx),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Only the updated bf16 shard leaves a rank, for each of its W-1 peers.
    return (world_size - 1) * (case.params["params"] // world_size) * 2


PROBLEM = Problem(
    slug="fsdp-zero1-adam",
    title="ZeRO-1 AdamW step on a shard, then the bf16 parameter all-gather",
    category=Category.FSDP,
    description=(
        "The optimizer step of DeepSpeed ZeRO stage 1 (and of Megatron-LM's distributed "
        "optimizer): the data-parallel all-reduce has already averaged the gradients, so "
        "every rank holds the same `grad` `[P]` (float32) of a flat parameter of P elements "
        "(P a multiple of W), the full bf16 parameters `params` `[P]`, and only its own 1/W "
        "of the optimizer state: elements `[r·P/W, (r+1)·P/W)` of the float32 master "
        "weights `master`, first moment `exp_avg` and second moment `exp_avg_sq` (each "
        "`[P/W]`). Hyperparameters come as Python numbers: `lr`, `beta1`, `beta2`, `eps`, "
        "`weight_decay` (floats) and `step` (int ≥ 1, the step being taken). Every rank "
        "returns `(params [P] bfloat16, master [P/W], exp_avg [P/W], exp_avg_sq [P/W] "
        "float32)`: the new state of its shard and the new parameters of every shard. The "
        "reference updates the input tensors in place and returns them; only values are "
        "compared.\n\n"
        "The update of shard element i, with g = `grad[r·P/W + i]`, in torch.optim.AdamW's "
        "order and in float64 from the float32 inputs: `p = master·(1 − lr·weight_decay)`; "
        "`m = beta1·exp_avg + (1 − beta1)·g`; `v = beta2·exp_avg_sq + (1 − beta2)·g²`; "
        "`p = p − (lr / (1 − beta1^step))·m / (sqrt(v) / sqrt(1 − beta2^step) + eps)`. The "
        "new `master`, `exp_avg` and `exp_avg_sq` are p, m and v rounded to float32 once "
        "(nearest even); the new parameter is the new float32 master rounded to bfloat16 "
        "(nearest even). Fused Adam kernels (DeepSpeed, Apex) compute in float32; here "
        "float64 makes the answer unique, since any float64 evaluation order rounds to the "
        "same float32 but for about one element in 10^8: outputs are compared to within "
        "two float32 ulps, so the bf16 parameters must in effect be exact.\n\n"
        "The reference runs the update on its gradient slice with PyTorch float64 "
        "elementwise ops, then calls `all_gather_into_tensor` of the bf16 shards into "
        "`params`. Only the updated bf16 parameters cross the links: P/W·2 bytes from each "
        "rank to each of its W−1 peers. A fused kernel reads 16 and writes 14 bytes per "
        "shard element in one pass, and can store each finished bf16 tile straight into "
        "every peer's `params` over symmetric memory, so that the all-gather overlaps the "
        "update."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=STATE_TOLERANCES,
    dev_cases=(
        Case("dev-fp32", "float32", {"params": 1000, "max_step": 1000}),
        # Step 1, where the bias corrections are largest (1 − beta2 = 0.05).
        Case("dev-first-step", "float32", {"params": 4096, "max_step": 1}),
    ),
    eval_cases=(
        Case("demo-16m", "float32", {"params": 1 << 24, "max_step": 10000}),
        Case("demo-32m", "float32", {"params": 1 << 25, "max_step": 10000}),
    ),
)
