from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    tokens, heads, dim = x.shape
    # Chunk j of the send buffer is this rank's tokens for rank j's heads.
    send = x.reshape(tokens, world_size, heads // world_size, dim).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    # Chunk j of the receive buffer is rank j's tokens for this rank's heads.
    return recv.reshape(world_size * tokens, heads // world_size, dim)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    return {"x": ctx.randn(p["t"] // ctx.world_size, p["heads"], p["d"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank keeps the (T/W)·(heads/W) block it already holds and sends the other W-1.
    p = case.params
    block = (p["t"] // world_size) * (p["heads"] // world_size) * p["d"]
    return (world_size - 1) * block * case.itemsize


PROBLEM = Problem(
    slug="cp-ulysses-seq-to-heads",
    title="Ulysses: sequence-sharded to head-sharded all-to-all",
    category=Category.CONTEXT,
    description=(
        "The first all-to-all of DeepSpeed-Ulysses context parallelism, run on q, k and v "
        "before attention. Every rank holds `x` `[T/W, heads, D]`: all heads of its "
        "sequence block (tokens `[r*T/W, (r+1)*T/W)`). Rank r returns `[T, heads/W, D]`: "
        "all T tokens of its head group (heads `[r*heads/W, (r+1)*heads/W)`), tokens in "
        "order.\n\n"
        "The reference packs a contiguous send buffer (a transpose copy), calls "
        "`torch.distributed.all_to_all_single` and returns the receive buffer reshaped. "
        "Each rank keeps one of its W blocks and must send the other W-1, (W-1)/W of "
        "`x`. Over symmetric memory a kernel can write each strided block straight into "
        "the peer's output at token offset r·T/W, with no packing copy on either side."
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
