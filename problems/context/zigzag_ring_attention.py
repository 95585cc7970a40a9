from __future__ import annotations

import torch
import torch.distributed as dist

from problems.context import _ring as ring
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _attend(q, k, v, causal: bool):
    """Softmax attention of one block: (out [n, h, d] float32, lse [h, n]).

    The ring references' block (problems/context/_ring.py: flash attention for bf16 on
    GPUs, float32 math elsewhere), on this problem's token-major layout.
    """
    out, lse = ring.attend(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), causal=causal)
    return out.transpose(0, 1), lse


def _merge(out, lse, block_out, block_lse):
    """Combine two partial softmaxes over disjoint key sets by their log-sum-exps."""
    new_lse = torch.logaddexp(lse, block_lse)
    out = (
        out * (lse - new_lse).exp().T[..., None]
        + block_out * (block_lse - new_lse).exp().T[..., None]
    )
    return out, new_lse


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    half = q.shape[0] // 2
    kv = torch.stack([k, v])
    out, lse = _attend(q, k, v, causal=True)  # own chunks, in order: plain causal mask
    for step in range(1, world_size):
        # Pass the key/value block one hop along the ring; after `step` hops this rank
        # holds the block of rank (rank - step).
        incoming = torch.empty_like(kv)
        ops = [
            dist.P2POp(dist.isend, kv, (rank + 1) % world_size),
            dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size),
        ]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        kv = incoming
        src = (rank - step) % world_size
        if src < rank:
            # Both query chunks come after the source's early chunk, and before its late one.
            block_out, block_lse = _attend(q, kv[0, :half], kv[1, :half], causal=False)
            out, lse = _merge(out, lse, block_out, block_lse)
        else:
            # Only the late query chunk sees the source, and it sees both of its chunks.
            block_out, block_lse = _attend(q[half:], kv[0], kv[1], causal=False)
            late_out, late_lse = _merge(out[half:], lse[:, half:], block_out, block_lse)
            out = torch.cat([out[:half], late_out])
            lse = torch.cat([lse[:, :half], late_lse], dim=1)
    return out.to(q.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows = 2 * case.params["seq"] // (2 * ctx.world_size)
    heads, dim = case.params["heads"], case.params["dim"]
    return {name: ctx.randn(rows, heads, dim) for name in ("q", "k", "v")}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every rank's early chunk is seen by every later token, hence by every peer, and rank
    # W-1's late chunk is seen by every peer's late chunk: rank W-1 must send both of its
    # chunks' keys and values ((T/W)·heads·dim each) to W-1 peers.
    p = case.params
    return (world_size - 1) * 2 * (p["seq"] // world_size) * p["heads"] * p["dim"] * case.itemsize


PROBLEM = Problem(
    slug="cp-zigzag-ring-attention",
    title="Causal ring attention, zigzag layout",
    category=Category.CONTEXT,
    description=(
        "Causal softmax attention over a sequence of `T` tokens split across W ranks in "
        "the zigzag layout: the sequence is cut into 2W chunks of `T/(2W)` tokens and "
        "rank r holds chunks r and 2W-1-r, concatenated in that order, so every rank has "
        "the same amount of causal work. Each rank holds `q`, `k` and `v` of shape "
        "`[2·T/(2W), heads, dim]` for its own tokens and returns the attention output of "
        "its own queries, `[2·T/(2W), heads, dim]` in the input dtype: "
        "`softmax(q·kᵀ/√dim)·v` over every key at or before the query's global position.\n\n"
        "The reference is ring attention: W-1 times, each rank passes its current key/value "
        "block to rank r+1 (`batch_isend_irecv`) and folds the block it receives into a "
        "running output with the log-sum-exp merge; every block is computed in float32. "
        "With the zigzag layout, a block from an earlier rank meets all queries but only "
        "its first chunk, and a block from a later rank meets only the late query chunk. "
        "Rank W-1's keys and values must reach every peer, so it sends at least "
        "2(W-1)·(T/W)·heads·dim elements; a kernel can overlap those transfers with the "
        "block computations (the reference runs flash attention per block), read peers' "
        "blocks straight from symmetric memory, or skip "
        "sending the late chunk to ranks that never look at it."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Float32 math against float64 differs by ~1e-6; the bf16 output's rounding is 2^-9
    # relative, and flash-style kernels that round P to bf16 add about as much again.
    # Outputs are averages of many unit values (|out| ~ 0.05 to 1), so the absolute floor
    # stays well below a dropped or doubled block's effect.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-3, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 128, "heads": 2, "dim": 16}),
        Case("dev-bf16", "bfloat16", {"seq": 256, "heads": 2, "dim": 32}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"seq": 4096, "heads": 16, "dim": 64}),
        Case("demo-8k", "bfloat16", {"seq": 8192, "heads": 16, "dim": 128}),
    ),
)
