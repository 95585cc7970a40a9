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
    world_size, n = dist.get_world_size(), master.numel()
    # A reduce-scatter whose sum is taken in float64: the float32 chunks travel as they are
    # (all-to-all: row j of `received` is rank j's chunk of this rank's shard) and are added
    # here. The sum of at most 8 float32 values is exact in float64 but for extreme exponent
    # spreads, so the average does not depend on the order.
    received = torch.empty_like(grad)
    dist.all_to_all_single(received, grad)
    average = received.view(world_size, n).double().sum(dim=0) / world_size
    shard = adamw_fp64(
        master,
        exp_avg,
        exp_avg_sq,
        average,
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
    # Each rank's own, un-reduced gradient of the whole flat parameter.
    grad = ctx.randn(case.params["params"], dtype=torch.float32) * GRAD_STD
    return {"grad": grad, **draw_state(case, ctx)}


def bytes_moved(case: Case, world_size: int) -> int:
    # The reduce-scatter: W-1 float32 chunks of P/W leave each rank; then the all-gather:
    # the updated bf16 shard goes to each of the W-1 peers.
    n = case.params["params"] // world_size
    return (world_size - 1) * n * (4 + 2)


PROBLEM = Problem(
    slug="fsdp-zero2-adam",
    title="ZeRO-2 gradient reduce-scatter, AdamW on the shard, bf16 all-gather",
    category=Category.FSDP,
    description=(
        "The gradient reduction and optimizer step of DeepSpeed ZeRO stage 2: gradients are "
        "sharded like the optimizer state, so instead of an all-reduce each rank "
        "reduce-scatters its own gradient and updates only its shard. Every rank holds its "
        "local, un-reduced `grad` `[P]` (float32) of a flat parameter of P elements (P a "
        "multiple of W), the full bf16 parameters `params` `[P]`, and its 1/W of the "
        "optimizer state: elements `[r·P/W, (r+1)·P/W)` of the float32 master weights "
        "`master`, first moment `exp_avg` and second moment `exp_avg_sq` (each `[P/W]`). "
        "Hyperparameters come as Python numbers: `lr`, `beta1`, `beta2`, `eps`, "
        "`weight_decay` (floats) and `step` (int ≥ 1, the step being taken). Every rank "
        "returns `(params [P] bfloat16, master [P/W], exp_avg [P/W], exp_avg_sq [P/W] "
        "float32)`: the new state of its shard and the new parameters of every shard. The "
        "reference updates the input tensors in place and returns them; only values are "
        "compared.\n\n"
        "The averaged gradient of shard element i is `g = (Σ_j grad_j[r·P/W + i]) / W` over "
        "all ranks j, summed in float64 (exact for at most 8 float32 addends but for "
        "extreme exponent spreads, so any order gives the same g). The update, in "
        "torch.optim.AdamW's order and in float64: `p = master·(1 − lr·weight_decay)`; "
        "`m = beta1·exp_avg + (1 − beta1)·g`; `v = beta2·exp_avg_sq + (1 − beta2)·g²`; "
        "`p = p − (lr / (1 − beta1^step))·m / (sqrt(v) / sqrt(1 − beta2^step) + eps)`. The "
        "new `master`, `exp_avg` and `exp_avg_sq` are p, m and v rounded to float32 once "
        "(nearest even); the new parameter is the new float32 master rounded to bfloat16 "
        "(nearest even). Real stacks sum in float32 (NCCL) and update in float32; here "
        "float64 makes the answer unique to the last float32 bit (outputs are compared to "
        "within two float32 ulps, so the bf16 parameters must in effect be exact). A "
        "float32 reduce-scatter does not pass: it moves g by an ulp, which moves m by "
        "many ulps wherever its two terms cancel (about 1% of elements).\n\n"
        "The reference moves the float32 chunks with `all_to_all_single` (the bytes of a "
        "reduce-scatter) and adds them in float64, runs the update with PyTorch float64 "
        "elementwise ops, then calls `all_gather_into_tensor` of the bf16 shards into "
        "`params`. Each rank must send (W−1)·P/W float32 gradient values and (W−1)·P/W bf16 "
        "parameters. Over symmetric memory one kernel can read the W−1 peers' gradient "
        "chunks directly, add them in registers, update the state and store each bf16 "
        "result into every peer's `params`, with no intermediate buffers and no separate "
        "collectives."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=STATE_TOLERANCES,
    dev_cases=(
        Case("dev-fp32", "float32", {"params": 1000, "max_step": 1000}),
        Case("dev-first-step", "float32", {"params": 4096, "max_step": 1}),
    ),
    eval_cases=(
        Case("demo-16m", "float32", {"params": 1 << 24, "max_step": 10000}),
        Case("demo-32m", "float32", {"params": 1 << 25, "max_step": 10000}),
    ),
)
