from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    tokens, heads, dim = q.shape
    local_heads = heads // world_size

    # Sequence-sharded to head-sharded, q, k and v in one exchange. Chunk j of the send
    # buffer is this rank's tokens for rank j's heads: [W, 3, heads/W, T/W, D].
    qkv = torch.stack([q, k, v]).reshape(3, tokens, world_size, local_heads, dim)
    send = qkv.permute(2, 0, 3, 1, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    # Chunk j of the receive buffer holds tokens block j; lay the blocks end to end.
    qh, kh, vh = recv.permute(1, 2, 0, 3, 4).reshape(3, 1, local_heads, world_size * tokens, dim)

    out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=dim**-0.5)

    # Head-sharded back to sequence-sharded: chunk j is rank j's tokens of this rank's heads.
    send = out[0].reshape(local_heads, world_size, tokens, dim).permute(1, 2, 0, 3).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.transpose(0, 1).reshape(tokens, heads, dim)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    shape = (p["t"] // ctx.world_size, p["heads"], p["d"])
    return {"q": ctx.randn(*shape), "k": ctx.randn(*shape), "v": ctx.randn(*shape)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Bringing every query together with every key: Ulysses sends (W-1)/W of q, k and v
    # out and (W-1)/W of the output back, 4·(W-1)·(T/W)·(heads/W)·D elements. Passing
    # k and v around a ring instead sends 2·(W-1)·(T/W)·heads·D, never less.
    p = case.params
    block = (p["t"] // world_size) * (p["heads"] // world_size) * p["d"]
    return 4 * (world_size - 1) * block * case.itemsize


PROBLEM = Problem(
    slug="cp-ulysses-attention",
    title="Ulysses context-parallel causal attention",
    category=Category.CONTEXT,
    description=(
        "DeepSpeed-Ulysses attention end to end. Every rank holds `q`, `k` and `v`, each "
        "`[T/W, heads, D]`, for its sequence block (tokens `[r*T/W, (r+1)*T/W)`). Rank r "
        "returns `[T/W, heads, D]` in the input dtype: causal softmax attention over the "
        "whole sequence of T tokens (token i attends to tokens 0..i), scale 1/sqrt(D), "
        "for its own tokens and all heads.\n\n"
        "The reference exchanges q, k and v in one `torch.distributed.all_to_all_single` "
        "so that each rank holds all T tokens of heads/W heads, runs "
        "`torch.nn.functional.scaled_dot_product_attention(is_causal=True)` (flash "
        "attention on GPU) on those heads, and sends the output back with a second "
        "all-to-all. Every exchange waits for the whole tensor, and each is wrapped in "
        "packing copies. Each rank must send (W-1)/W of q, k, v and of the output. A "
        "faster kernel overlaps them: start attention on the head groups or key blocks "
        "that have arrived while the rest is in flight, read peers' q, k, v in place "
        "over symmetric memory, and write each output tile straight into the rank that "
        "owns its tokens."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances={
        # Softmax and sums over T keys in float32, in another order.
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        # Flash attention rounds probabilities to bf16 before the PV product and the
        # output once more; both are averages, so the error is about one output ulp
        # (2^-8 relative) and far below the effect of a missing or misplaced key block.
        "bfloat16": Tolerance(atol=2e-3, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 32, "heads": 8, "d": 16}),
        Case("dev-bf16", "bfloat16", {"t": 64, "heads": 8, "d": 32}),
    ),
    eval_cases=(
        Case("demo-8k-32h", "bfloat16", {"t": 8192, "heads": 32, "d": 128}),
        Case("demo-16k-16h", "bfloat16", {"t": 16384, "heads": 16, "d": 128}),
    ),
)
