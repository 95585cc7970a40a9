from __future__ import annotations

from functools import cache

import torch
import torch.distributed as dist

from problems.pipeline._schedule import busiest_sender, interleaved, run, ticks
from problems.pipeline._stage import DEEP_PIPELINE_GRADS, DOWN_GAIN, STAGE_TEXT, Stages, weight
from problems.spec import Case, Category, InputContext, Problem


def _placement(world_size: int, chunks: int) -> list[int]:
    # Chunk c of rank r is stage c·W + r: the model wraps around the ranks V times.
    return [stage % world_size for stage in range(chunks * world_size)]


@cache
def _table(world_size: int, chunks: int, micro_batches: int) -> list:
    # The schedule depends on the sizes alone: computed once per (W, V, M).
    orders = [interleaved(r, world_size, chunks, micro_batches) for r in range(world_size)]
    return ticks(orders, _placement(world_size, chunks))


def solution(
    x: torch.Tensor,
    target: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    micro_batches: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    chunks, (batch, seq, hidden) = w1.shape[0], x.shape[1:]
    placement = _placement(world_size, chunks)
    mine = [c * world_size + rank for c in range(chunks)]
    stages = Stages(x, target, w1, w2, mine, len(placement), micro_batches)
    table = _table(world_size, chunks, micro_batches)
    run(table, placement, stages.step, lambda: x.new_empty(batch * seq, hidden))
    return stages.results(micro_batches * batch * seq)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p, rank, last = case.params, ctx.rank, ctx.world_size - 1
    m, b, s, h, f, v = (p[k] for k in ("micro_batches", "batch", "seq", "hidden", "ffn", "chunks"))
    return {
        "x": ctx.randn(m if rank == 0 else 0, b, s, h),
        "target": ctx.randn(m if rank == last else 0, b, s, h),
        # This rank's V chunks (stages r, W + r, ...): its own draw.
        "w1": weight(ctx, h, v, h, f),
        "w2": weight(ctx, f, v, f, h, gain=DOWN_GAIN),
        "micro_batches": m,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per micro-batch a rank sends an activation for each of its stages but the model's
    # last and a gradient for each but the first: 2V messages on a middle rank, 2V-1 at
    # W = 2, each [B·S, H] in the dtype.
    p = case.params
    message = p["batch"] * p["seq"] * p["hidden"] * case.itemsize
    sent = busiest_sender(_placement(world_size, p["chunks"]), world_size)
    return p["micro_batches"] * sent * message


PROBLEM = Problem(
    slug="pp-interleaved-1f1b",
    title="Interleaved 1F1B pipeline schedule (virtual stages, Megatron-LM)",
    category=Category.PIPELINE,
    description=(
        "A training step under Megatron-LM's interleaved 1F1B schedule (virtual pipeline "
        "stages; torch.distributed.pipelining's ScheduleInterleaved1F1B). The model has "
        "V·W stages and each rank holds V model chunks: chunk c of rank r is stage "
        "c·W + r, so activations go r → r+1 within a chunk and W-1 → 0 from chunk c to "
        "c+1, and gradients the other way. Rank r holds `w1` `[V, H, F]` and `w2` "
        "`[V, F, H]` (chunk c's weights at index c, drawn on that rank) and "
        "`micro_batches` = M, a multiple of W. Stage 0 (rank 0) takes `x` `[M, B, S, H]` "
        "and the last stage, V·W-1 (rank W-1), holds `target` `[M, B, S, H]`; elsewhere "
        "these are empty `[0, B, S, H]` tensors. " + STAGE_TEXT + "\n\n"
        "Rank r returns `(dw1, dw2, dx, losses)`: `dw1` `[V, H, F]` and `dw2` `[V, F, H]` "
        "in float32, its chunks' gradients of `Σ_m loss_m` (chunk c at index c), "
        "multiplied once at the end by `1/sqrt(M·B·S)` (a fixed scale that keeps them "
        "near unit size); `dx` `[M, B, S, H]`, the gradient with respect to `x`, in the "
        "dtype on rank 0 and an empty `[0]` dtype tensor elsewhere; `losses` `[M]` "
        "float32 on rank W-1 and an empty `[0]` float32 tensor elsewhere.\n\n"
        "The reference runs Megatron's order. Virtual step k (of M·V) works on "
        "micro-batch (k // (V·W))·W + k % W, of chunk (k // W) % V for a forward and of "
        "chunk V-1 - (k // W) % V for a backward: groups of W micro-batches sweep the "
        "chunks upward, then downward. Rank r runs min(2·(W-1-r) + (V-1)·W, M·V) "
        "warm-up forwards (all M·V when M = W), then alternates forward step "
        "k + warm-up with backward step k, then runs the remaining backwards. The orders "
        "are replayed in lockstep ticks, one action per rank per tick, each tick's "
        "messages (`[B·S, H]` in the dtype) in one `batch_isend_irecv`. Each stage's "
        "backwards come in micro-batch order 0..M-1, so its weight gradients are summed "
        "in that order; nothing else depends on the schedule, so any dependency-"
        "respecting order (other warm-up depths, split backwards, depth-first or "
        "breadth-first chunks) and any fusion of the roundings inside a stage pass, "
        "within the tolerance. Interleaving shrinks the bubble by V but multiplies the "
        "messages by V: every micro-batch crosses 2·V·W-2 rank boundaries, including "
        "the wrap-around W-1 → 0, so the transfers must hide behind the GEMMs (writes "
        "into the receiver's symmetric buffer from the epilogue, per-tile flags)."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=DEEP_PIPELINE_GRADS,
    dev_cases=(
        # V = 3 and, at W = 8, M = W: Megatron's all-forwards-first case. float32 keeps
        # the 24 stages of W = 8 within the float32 tolerance.
        Case(
            "dev-fp32-v3",
            "float32",
            {"micro_batches": 8, "chunks": 3, "batch": 1, "seq": 4, "hidden": 32, "ffn": 32},
        ),
        Case(
            "dev-bf16",
            "bfloat16",
            {"micro_batches": 16, "chunks": 2, "batch": 2, "seq": 4, "hidden": 64, "ffn": 64},
        ),
    ),
    eval_cases=(
        # 512-token micro-batches: at 1024 the reference took 7.9 ms on 2x H200
        # (2026-11-23), over the catalog's 5 ms ceiling per case.
        Case(
            "demo-h2k-v2-m8",
            "bfloat16",
            {
                "micro_batches": 8,
                "chunks": 2,
                "batch": 1,
                "seq": 512,
                "hidden": 2048,
                "ffn": 2048,
            },
        ),
        Case(
            "demo-h2k-v2-m8-b2",
            "bfloat16",
            {
                "micro_batches": 8,
                "chunks": 2,
                "batch": 2,
                "seq": 512,
                "hidden": 2048,
                "ffn": 1024,
            },
        ),
    ),
)
