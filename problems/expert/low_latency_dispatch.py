from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._routing_a import (
    all_to_all_rows,
    draw_topk,
    exchange_counts,
    expected_peer_rows,
    rank_tokens,
    sort_by_expert,
)
from problems.spec import EXACT, Case, Category, InputContext, Problem

BLOCK = 128  # channels per scale
E4M3_MAX = 448.0  # largest finite float8_e4m3fn


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token, per 128 channels: e4m3 codes (as uint8 bits) and float32 scales."""
    tokens, hidden = x.shape
    blocks = x.float().view(tokens, hidden // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=2, keepdim=True)
    # A tensor divisor, not a Python number: CUDA turns division by a scalar into a
    # multiplication by its reciprocal, one ulp away from the IEEE quotient specified.
    scale = torch.where(amax > 0, amax / torch.full_like(amax, E4M3_MAX), torch.ones_like(amax))
    codes = (blocks / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.view(torch.uint8).view(tokens, hidden), scale.view(tokens, hidden // BLOCK)


def solution(
    x: torch.Tensor, topk_ids: torch.Tensor, num_experts: int, max_tokens: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    local = num_experts // world_size
    k = topk_ids.shape[1]
    codes, scales = quantize(x)
    order, per_expert = sort_by_expert(topk_ids, num_experts)  # by expert, then token
    received = exchange_counts(per_expert)  # [W sources, L local experts]
    send, receive = per_expert.view(world_size, local).sum(1).tolist(), received.sum(1).tolist()
    recv_codes = all_to_all_rows(codes[order // k], send, receive)
    recv_scales = all_to_all_rows(scales[order // k], send, receive)
    # Rows arrive in blocks (source s, local expert l); the p-th row of a block goes to
    # slot s * max_tokens + p of expert l.
    sizes = received.reshape(-1)
    block = torch.repeat_interleave(
        torch.arange(len(sizes), device=x.device), sizes, output_size=len(recv_codes)
    )
    position = torch.arange(len(block), device=x.device) - (sizes.cumsum(0) - sizes)[block]
    expert, slot = block % local, (block // local) * max_tokens + position
    out_codes = codes.new_zeros((local, world_size * max_tokens, x.shape[1]))
    out_scales = scales.new_zeros((local, world_size * max_tokens, x.shape[1] // BLOCK))
    out_codes[expert, slot] = recv_codes
    out_scales[expert, slot] = recv_scales
    return out_codes, out_scales, received.T.to(torch.int32).contiguous()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    max_tokens, hidden = case.params["tokens"], case.params["hidden"]
    tokens = rank_tokens(case, ctx.rank)
    if tokens and case.params.get("ragged", 0):
        tokens = int(ctx.randint(1, max_tokens + 1, 1).item())
    # Blocks of different magnitudes, as in real activations, so the scales differ; about
    # one block in 32 is all zero (scale 1 by the rule).
    blocks = (tokens, hidden // BLOCK, 1)
    magnitude = torch.exp(ctx.randn(*blocks, dtype=torch.float32))
    zero = torch.rand(blocks, generator=ctx.gen(), device=ctx.device) < 1 / 32
    x = ctx.randn(tokens, hidden // BLOCK, BLOCK, dtype=torch.float32) * magnitude * ~zero
    return {
        "x": x.view(tokens, hidden).to(ctx.dtype),
        "topk_ids": draw_topk(case, ctx, tokens),
        "num_experts": case.params["experts"],
        "max_tokens": max_tokens,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A token's codes and scales (H + 4H/128 bytes) go once to each peer rank hosting one
    # of its experts: the expected number of such rows under the case's routing, averaged
    # over the ranks, with a ragged rank's T uniform in [1, max] (mean (max+1)/2).
    rows = expected_peer_rows(case, world_size)
    if case.params.get("ragged", 0):
        rows *= (case.params["tokens"] + 1) / 2 / case.params["tokens"]
    hidden = case.params["hidden"]
    return max(1, int(rows * (hidden + 4 * hidden // BLOCK)))


PROBLEM = Problem(
    slug="ep-low-latency-dispatch",
    title="Low-latency MoE decode dispatch with FP8 quantization (DeepEP-style)",
    category=Category.EXPERT,
    description=(
        "The low-latency dispatch of MoE decoding, as DeepEP's low-latency kernels run it "
        "for DeepSeek-V3-style inference: few tokens per rank, quantized to FP8 on the way "
        "and written into a fixed-size receive layout, so that the expert GEMMs see static "
        "shapes. `E` experts (`num_experts`, a multiple of W), `L = E/W` per rank, expert "
        "e on rank `e // L` as local expert `e % L`. Rank r holds `x` `[T_r, H]` (bf16 or "
        "float32, H a multiple of 128, `T_r <= max_tokens`, the same `max_tokens` on "
        "every rank; `T_r` may be 0 and differ between ranks) and `topk_ids` `[T_r, k]` "
        "(int64, distinct experts per token; experts may receive no tokens).\n\n"
        "Quantization, exactly: each token's row is split into H/128 blocks of 128 "
        "channels; in float32, `amax = max |x|` over the block, `scale = amax / 448` "
        "(IEEE division; `scale = 1` for an all-zero block), code = `x / scale` (IEEE "
        "division) clamped to ±448 and rounded to nearest even as `torch.float8_e4m3fn` "
        "(a negative quotient that rounds to zero keeps its sign: code 0x80).\n\n"
        "Rank r returns `(codes, scales, counts)`. `counts` `[L, W]` int32: `counts[l, s]` "
        "is the number of rank s's tokens that chose expert `r·L + l`. `codes` "
        "`[L, W·max_tokens, H]` uint8 (the e4m3 codes' bit patterns, "
        "`.view(torch.uint8)`) and `scales` `[L, W·max_tokens, H/128]` float32: a token "
        "t of rank s that chose expert `r·L + l` occupies slot "
        "`s·max_tokens + p` of local expert l, p being the number of rank s's tokens "
        "before t that chose the same expert; every other slot is zero (codes and "
        "scales). All three are compared exactly.\n\n"
        "The reference quantizes, sorts the (token, slot) pairs by expert, exchanges "
        "per-expert counts and then codes and scales with `all_to_all_single`s, and "
        "scatters the rows into zeroed buffers. At decode sizes the transfer is a few MB "
        "and three collectives' latency dominates: a kernel can quantize in registers "
        "and write each token's codes and scales directly into its slot on the peer "
        "over symmetric memory (the slot follows from the sender's own routing alone), "
        "then signal the count, with no count exchange round trip."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 8, "hidden": 256, "experts": 16, "topk": 4}),
        Case(
            "dev-bf16-ragged",
            "bfloat16",
            {"tokens": 16, "hidden": 384, "experts": 8, "topk": 2, "ragged": 1},
        ),
        Case(
            "dev-skew-empty",
            "bfloat16",
            {
                "tokens": 12,
                "hidden": 256,
                "experts": 16,
                "topk": 2,
                "skew": 90,
                "cold": 1,
                "empty_rank": 1,
            },
        ),
    ),
    eval_cases=(
        Case(
            "demo-decode-128", "bfloat16", {"tokens": 128, "hidden": 7168, "experts": 64, "topk": 8}
        ),
        Case(
            "demo-decode-ragged",
            "bfloat16",
            {
                "tokens": 128,
                "hidden": 4096,
                "experts": 128,
                "topk": 8,
                "ragged": 1,
                "skew": 50,
                "cold": 4,
                "empty_rank": 1,
            },
        ),
    ),
)
