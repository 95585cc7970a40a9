from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def _zigzag_home(chunk: int, world_size: int) -> tuple[int, int]:
    """(rank, slot) of one of the 2W chunks in the zigzag layout: rank r holds r, 2W-1-r."""
    if chunk < world_size:
        return chunk, 0
    return 2 * world_size - 1 - chunk, 1


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    half = x.shape[0] // 2
    out = torch.empty_like(x)
    ops = []
    # This rank's contiguous tokens are chunks 2r and 2r+1; it receives chunks r and
    # 2W-1-r, which come from ranks r // 2 and (2W-1-r) // 2.
    for slot, chunk in enumerate((2 * rank, 2 * rank + 1)):
        dst, dst_slot = _zigzag_home(chunk, world_size)
        piece = x[slot * half : (slot + 1) * half]
        if dst == rank:
            out[dst_slot * half : (dst_slot + 1) * half] = piece
        else:
            ops.append(dist.P2POp(dist.isend, piece.contiguous(), dst))
    for slot, chunk in enumerate((rank, 2 * world_size - 1 - rank)):
        src = chunk // 2
        if src != rank:
            ops.append(dist.P2POp(dist.irecv, out[slot * half : (slot + 1) * half], src))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return out


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows = case.params["seq"] // ctx.world_size
    return {"x": ctx.randn(rows, case.params["hidden"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # The busiest rank sends both of its chunks; a chunk that lands on its own rank stays
    # (chunk 0 on rank 0, and chunk 2r+1 or 2r when 3r+1 or 3r equals 2W-1).
    chunk_bytes = case.params["seq"] // (2 * world_size) * case.params["hidden"] * case.itemsize
    sent = [
        sum(_zigzag_home(c, world_size)[0] != r for c in (2 * r, 2 * r + 1))
        for r in range(world_size)
    ]
    return max(sent) * chunk_bytes


PROBLEM = Problem(
    slug="cp-zigzag-reshuffle",
    title="Contiguous to zigzag sequence layout",
    category=Category.CONTEXT,
    description=(
        "Converts a sequence of `T` tokens from the contiguous layout to the zigzag layout "
        "used by load-balanced causal ring attention. Rank r holds `x` `[T/W, hidden]`, "
        "the tokens `[r·T/W, (r+1)·T/W)`. Cut the sequence into 2W chunks of `T/(2W)` "
        "tokens; rank r returns `[T/W, hidden]` holding chunk r followed by chunk 2W-1-r, "
        "bit for bit.\n\n"
        "Rank r's input is chunks 2r and 2r+1; chunk c goes to rank c (first half) when "
        "c < W and to rank 2W-1-c (second half) otherwise. The reference posts one "
        "`isend` per outgoing chunk and one `irecv` per incoming chunk in a single "
        "`batch_isend_irecv`, and copies a chunk that stays home. Most ranks must send "
        "both of their chunks, `T/W·hidden` elements, to two different peers; over "
        "symmetric memory each rank can write its chunks straight into their owners' "
        "output buffers and signal."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 64, "hidden": 8}),
        Case("dev-bf16", "bfloat16", {"seq": 128, "hidden": 32}),
    ),
    eval_cases=(
        Case("demo-32k", "bfloat16", {"seq": 32768, "hidden": 4096}),
        Case("demo-128k", "bfloat16", {"seq": 131072, "hidden": 4096}),
    ),
)
