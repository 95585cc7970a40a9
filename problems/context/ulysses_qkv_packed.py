from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    tokens, _, heads, dim = qkv.shape
    local_heads = heads // world_size
    # Chunk j: this rank's tokens of q, k and v for rank j's heads, so one exchange
    # carries all three.
    send = qkv.reshape(tokens, 3, world_size, local_heads, dim).permute(2, 0, 1, 3, 4)
    send = send.contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    full = recv.reshape(world_size * tokens, 3, local_heads, dim)
    q, k, v = (t.contiguous() for t in full.unbind(1))
    return q, k, v


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    return {"qkv": ctx.randn(p["t"] // ctx.world_size, 3, p["heads"], p["d"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # As the plain sequence-to-heads exchange, three times over: W-1 of each rank's W
    # blocks of q, k and v leave it.
    p = case.params
    block = (p["t"] // world_size) * (p["heads"] // world_size) * p["d"]
    return 3 * (world_size - 1) * block * case.itemsize


PROBLEM = Problem(
    slug="cp-ulysses-qkv-packed",
    title="Ulysses: packed QKV all-to-all",
    category=Category.CONTEXT,
    description=(
        "Ulysses' entry all-to-all fed straight from a fused QKV projection. Every rank "
        "holds `qkv` `[T/W, 3, heads, D]` for its sequence block (tokens "
        "`[r*T/W, (r+1)*T/W)`); index 0, 1, 2 of the second dimension is q, k, v. Rank r "
        "returns `(q, k, v)`, each `[T, heads/W, D]`: all T tokens of its head group "
        "(heads `[r*heads/W, (r+1)*heads/W)`), tokens in order.\n\n"
        "The reference packs one send buffer holding q, k and v per destination (a "
        "permute copy), makes a single `torch.distributed.all_to_all_single` call, so "
        "three exchanges pay one latency, and unpacks the receive buffer into three "
        "contiguous tensors (three more copies). Each rank must send (W-1)/W of `qkv`. "
        "Over symmetric memory a kernel can read its head group of every peer's `qkv` "
        "in place and write q, k and v directly, copying each element once."
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
        Case("demo-16k-32h", "bfloat16", {"t": 16384, "heads": 32, "d": 128}),
    ),
)
