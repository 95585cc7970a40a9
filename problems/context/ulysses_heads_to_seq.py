from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    tokens, local_heads, dim = x.shape
    # Chunk j of the send buffer is rank j's tokens; x is already laid out that way.
    send = x.reshape(world_size, tokens // world_size, local_heads, dim)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    # Chunk j of the receive buffer is this rank's tokens for rank j's heads.
    return recv.transpose(0, 1).reshape(tokens // world_size, world_size * local_heads, dim)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    return {"x": ctx.randn(p["t"], p["heads"] // ctx.world_size, p["d"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank keeps its own tokens of its heads and sends the other W-1 token blocks.
    p = case.params
    block = (p["t"] // world_size) * (p["heads"] // world_size) * p["d"]
    return (world_size - 1) * block * case.itemsize


PROBLEM = Problem(
    slug="cp-ulysses-heads-to-seq",
    title="Ulysses: head-sharded to sequence-sharded all-to-all",
    category=Category.CONTEXT,
    description=(
        "The second all-to-all of DeepSpeed-Ulysses context parallelism, run on the "
        "attention output: the inverse of `cp-ulysses-seq-to-heads`. Every rank holds `x` "
        "`[T, heads/W, D]`: all T tokens of its head group (heads "
        "`[r*heads/W, (r+1)*heads/W)`). Rank r returns `[T/W, heads, D]`: all heads of "
        "its sequence block (tokens `[r*T/W, (r+1)*T/W)`), heads in order.\n\n"
        "The reference calls `torch.distributed.all_to_all_single` on `x` as it is (its "
        "token blocks are already contiguous) and then interleaves the received head "
        "groups with a transpose copy. Each rank must send W-1 of its W token blocks, "
        "(W-1)/W of `x`. Over symmetric memory a kernel can write each block straight "
        "into the peer's output at head offset r·heads/W, so no copy follows the "
        "exchange."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 16, "heads": 8, "d": 4}),
        Case("dev-bf16", "bfloat16", {"t": 32, "heads": 8, "d": 16}),
    ),
    eval_cases=(
        Case("demo-8k-32h", "bfloat16", {"t": 8192, "heads": 32, "d": 128}),
        Case("demo-32k-32h", "bfloat16", {"t": 32768, "heads": 32, "d": 128}),
    ),
)
