from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp._shards import chunk_rows
from problems.spec import EXACT, Case, Category, InputContext, Problem

FP8_MAX = 448.0  # the largest finite float8_e4m3fn
AMAX_FLOOR = 1e-12  # torchao's EPS: an all-zero weight gets scale 448 / 1e-12, codes 0


def _shapes(hidden: int, ffn: int, qkv: int) -> list[tuple[int, int]]:
    """The four weights of a transformer block, in input order."""
    return [(qkv, hidden), (hidden, hidden), (2 * ffn, hidden), (hidden, ffn)]


def _amax(shard: torch.Tensor) -> torch.Tensor:
    # abs and max are exact in any dtype; an empty shard contributes 0.
    if shard.numel() == 0:
        return torch.zeros((), dtype=torch.float32, device=shard.device)
    return shard.abs().amax().float()


def _gather_codes(codes: torch.Tensor, rows: int) -> torch.Tensor:
    """Every rank's [rows_j, C] uint8 codes, in rank order: [rows, C]. Shards are padded
    to ceil(rows/W) rows for the all-gather, as FSDP2 pads its all-gather input."""
    world_size = dist.get_world_size()
    size = -(-rows // world_size)
    padded = codes.new_zeros(size, codes.shape[1])
    padded[: codes.shape[0]] = codes
    out = codes.new_empty(world_size * size, codes.shape[1])
    dist.all_gather_into_tensor(out, padded)
    return out[:rows]


def solution(
    wqkv: torch.Tensor,
    wo: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    hidden: int,
    ffn: int,
    qkv: int,
) -> tuple[torch.Tensor, ...]:
    shards = (wqkv, wo, w13, w2)
    # One all-reduce for every weight's global amax, as torchao precomputes the scales.
    amax = torch.stack([_amax(s) for s in shards])
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)
    # Tensor / tensor: IEEE division on every device (a Python scalar numerator would
    # become a multiplication by a rounded reciprocal).
    scales = torch.full_like(amax, FP8_MAX) / amax.clamp(min=AMAX_FLOOR)
    gathered = []
    for shard, scale, (rows, _) in zip(shards, scales, _shapes(hidden, ffn, qkv), strict=True):
        scaled = (shard.float() * scale).clamp(-FP8_MAX, FP8_MAX)
        codes = scaled.to(torch.float8_e4m3fn).view(torch.uint8)
        gathered.append(_gather_codes(codes, rows))
    return (*gathered, scales)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p, world_size, rank = case.params, ctx.world_size, ctx.rank
    shapes = _shapes(p["hidden"], p["ffn"], p["qkv"])
    inputs = {}
    for name, (rows, cols) in zip(("wqkv", "wo", "w13", "w2"), shapes, strict=True):
        # N(0, 1/cols) weights: each tensor gets its own amax and scale.
        shard = ctx.randn(chunk_rows(rows, world_size, rank), cols, dtype=torch.float32)
        inputs[name] = (shard * cols**-0.5).to(ctx.dtype)
    if p.get("zero_wo"):
        # A zero-initialised output projection (as some initialisations do): amax = 0.
        inputs["wo"].zero_()
    return {**inputs, "hidden": p["hidden"], "ffn": p["ffn"], "qkv": p["qkv"]}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's padded fp8 shard (ceil(R/W)·C bytes per weight) goes to its W-1 peers;
    # the four float32 amaxes are all-reduced (2(W-1)/W of 16 bytes).
    p = case.params
    codes = sum(-(-r // world_size) * c for r, c in _shapes(p["hidden"], p["ffn"], p["qkv"]))
    return (world_size - 1) * codes + 2 * (world_size - 1) * 16 // world_size


PROBLEM = Problem(
    slug="fsdp-fp8-param-gather",
    title="FP8 parameter all-gather with per-tensor amax (float8 FSDP2)",
    category=Category.FSDP,
    description=(
        "The parameter all-gather of float8 training with FSDP2 (torchao's float8 "
        "all-gather with precomputed dynamic scales): weights are sharded in high "
        "precision and cast to float8 e4m3 with one scale per tensor before the gather, so "
        "the gather moves one byte per element. The weights of a transformer block, for the "
        "ints `hidden` H, `ffn` F and `qkv` Q, are `wqkv` `[Q, H]`, `wo` `[H, H]`, `w13` "
        "`[2F, H]` and `w2` `[H, F]`; each is sharded on dim 0 as FSDP2 does (torch.chunk): "
        "with R rows and c = ceil(R/W), rank r holds rows `[r·c, min((r+1)·c, R))`, so the "
        "last ranks' shards may be short or empty. Rank r holds its four shards (bfloat16 "
        "or float32, the case's dtype) and the three ints. Every rank returns "
        "`(wqkv_fp8 [Q, H], wo_fp8 [H, H], w13_fp8 [2F, H], w2_fp8 [H, F], scales [4])`: "
        "the whole weights' float8_e4m3fn codes as uint8 bit patterns "
        "(`.view(torch.uint8)`, compared exactly) and the four float32 scales in input "
        "order.\n\n"
        "Per weight, in float32: `amax` = max |w| over the whole weight (every rank's "
        "shard; an empty shard counts 0); `scale = 448 / max(amax, 1e-12)` (1e-12 rounded "
        "to float32 first; IEEE division, so an all-zero weight gets ~4.48e14 and codes "
        "0); each element's code is "
        "`w·scale` (float32 multiplication) clamped to [−448, 448] and rounded to "
        "float8_e4m3fn to nearest even (a negative value that rounds to zero keeps its "
        "sign: code 0x80). Everything is exact, so the codes and scales must match bit for "
        "bit.\n\n"
        "The reference all-reduces (MAX) the four local amaxes in one call, scales and "
        "casts each shard with PyTorch ops, pads it to c rows and calls "
        "`all_gather_into_tensor` on the uint8 codes of each weight. Each rank must send "
        "its padded fp8 shards (c·C bytes per weight) to W−1 peers, a quarter of float32's "
        "traffic. A fused kernel can compute the local amaxes in one pass over the shards, "
        "exchange them through symmetric memory with a flag, and then quantize and write "
        "its codes straight into every peer's output in a second pass."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        # Odd sizes: wo's 13 rows are 7, 6 at W = 2; 4, 4, 4, 1 at W = 4; and at W = 8,
        # 2 on each of ranks 0-5, 1 on rank 6 and none on rank 7.
        Case("dev-fp32", "float32", {"hidden": 13, "ffn": 20, "qkv": 21}),
        Case("dev-bf16-zero-wo", "bfloat16", {"hidden": 32, "ffn": 40, "qkv": 48, "zero_wo": 1}),
    ),
    eval_cases=(
        # TinyLlama-1.1B's block (GQA: 32 query heads, 4 KV heads of 64): 44M elements.
        Case("demo-tinyllama-fp32", "float32", {"hidden": 2048, "ffn": 5632, "qkv": 2560}),
        Case("demo-tinyllama-bf16", "bfloat16", {"hidden": 2048, "ffn": 5632, "qkv": 2560}),
    ),
)
