from __future__ import annotations

from functools import cache

import torch
import torch.distributed as dist

from problems.pipeline._schedule import busiest_sender, one_f_one_b, run, ticks
from problems.pipeline._stage import DOWN_GAIN, PIPELINE_GRADS, STAGE_TEXT, Stages, weight
from problems.spec import Case, Category, InputContext, Problem


@cache
def _table(world_size: int, micro_batches: int) -> list:
    # The schedule depends on the sizes alone: computed once per (W, M).
    orders = [one_f_one_b(r, world_size, micro_batches) for r in range(world_size)]
    return ticks(orders, range(world_size))


def solution(
    x: torch.Tensor,
    target: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    micro_batches: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    batch, seq, hidden = x.shape[1:]
    stages = Stages(x, target, w1[None], w2[None], [rank], world_size, micro_batches)
    # Stage s lives on rank s.
    table = _table(world_size, micro_batches)
    run(table, range(world_size), stages.step, lambda: x.new_empty(batch * seq, hidden))
    dw1, dw2, dx, losses = stages.results(micro_batches * batch * seq)
    return dw1[0], dw2[0], dx, losses


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p, rank, last = case.params, ctx.rank, ctx.world_size - 1
    m, b, s, h, f = p["micro_batches"], p["batch"], p["seq"], p["hidden"], p["ffn"]
    return {
        "x": ctx.randn(m if rank == 0 else 0, b, s, h),
        "target": ctx.randn(m if rank == last else 0, b, s, h),
        # This rank's stage: its own draw, unlike every other rank's.
        "w1": weight(ctx, h, h, f),
        "w2": weight(ctx, f, f, h, gain=DOWN_GAIN),
        "micro_batches": m,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per micro-batch a middle rank sends one [B·S, H] activation forward and one gradient
    # backward; at W = 2 each rank sends only one of them.
    p = case.params
    message = p["batch"] * p["seq"] * p["hidden"] * case.itemsize
    return p["micro_batches"] * busiest_sender(range(world_size), world_size) * message


PROBLEM = Problem(
    slug="pp-1f1b",
    title="Pipeline 1F1B schedule: forward and backward of M micro-batches over W stages",
    category=Category.PIPELINE,
    description=(
        "A training step of a W-stage pipeline under the 1F1B schedule (PipeDream-flush; "
        "Megatron-LM's default non-interleaved schedule, torch.distributed.pipelining's "
        "Schedule1F1B). Rank r is stage r. Every rank holds its stage's weights `w1` "
        "`[H, F]` and `w2` `[F, H]` (drawn on that rank) and `micro_batches` = M. Rank 0 "
        "holds the inputs `x` `[M, B, S, H]`, rank W-1 the targets `target` "
        "`[M, B, S, H]`; elsewhere these are empty `[0, B, S, H]` tensors. " + STAGE_TEXT + "\n\n"
        "Every rank returns `(dw1, dw2, dx, losses)`: `dw1` `[H, F]` and `dw2` `[F, H]` "
        "in float32, its stage's gradients of `Σ_m loss_m`, multiplied once at the end by "
        "`1/sqrt(M·B·S)` (a fixed scale that keeps them near unit size whatever the "
        "token count, like the final gradient scaling Megatron applies after the "
        "schedule); `dx` `[M, B, S, H]` in the dtype, the gradient of `Σ_m loss_m` with "
        "respect to `x`, on rank 0 and an empty `[0]` dtype tensor elsewhere; `losses` "
        "`[M]` float32 on rank W-1 and an empty `[0]` float32 tensor elsewhere.\n\n"
        "The reference runs 1F1B: rank r runs min(W-1-r, M) warm-up forwards "
        "(micro-batches 0, 1, ...), then alternates the forward of its next micro-batch "
        "with the backward of its oldest one, then runs the remaining backwards; each "
        "rank's forwards and backwards both take micro-batches in order 0..M-1. The "
        "orders are replayed in lockstep ticks, one action per rank per tick, and each "
        "tick's messages (activations r → r+1, gradients r+1 → r, `[B·S, H]` in the "
        "dtype) travel in one `batch_isend_irecv`. The outputs do not depend on the "
        "schedule: any order that respects the dependencies (GPipe, zero-bubble's split "
        "backward, a split of micro-batches into smaller pieces) and any fusion of the "
        "roundings inside a stage passes, within the tolerance. Per micro-batch, one "
        "activation and one gradient cross every stage boundary; a fast solution "
        "overlaps them with the GEMMs (the producer's epilogue writes into the next "
        "rank's symmetric buffer and raises a flag per tile), drops the lockstep waits, "
        "and fills the pipeline bubbles with weight-gradient GEMMs."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=PIPELINE_GRADS,
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"micro_batches": 4, "batch": 2, "seq": 4, "hidden": 32, "ffn": 64},
        ),
        Case(
            "dev-bf16",
            "bfloat16",
            {"micro_batches": 6, "batch": 1, "seq": 16, "hidden": 64, "ffn": 128},
        ),
        # Fewer micro-batches than stages at W = 4 and 8: the pipeline never fills.
        Case(
            "dev-bf16-m3",
            "bfloat16",
            {"micro_batches": 3, "batch": 2, "seq": 8, "hidden": 32, "ffn": 64},
        ),
    ),
    eval_cases=(
        Case(
            "demo-h2k-m4",
            "bfloat16",
            {"micro_batches": 4, "batch": 1, "seq": 1024, "hidden": 2048, "ffn": 4096},
        ),
        Case(
            "demo-h2k-m8",
            "bfloat16",
            {"micro_batches": 8, "batch": 1, "seq": 1024, "hidden": 2048, "ffn": 2048},
        ),
    ),
)
