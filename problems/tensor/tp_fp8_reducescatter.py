from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance
from problems.tensor._fp8 import BLOCK, quantize


def solution(x: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    q, scale = quantize(x)
    # Block rows are in chunk order, so splitting dim 0 W ways sends chunk j to rank j.
    q_bytes, scale_bytes = q.view(torch.uint8), scale.view(torch.uint8)
    q_recv, scale_recv = torch.empty_like(q_bytes), torch.empty_like(scale_bytes)
    dist.all_to_all_single(q_recv, q_bytes)
    dist.all_to_all_single(scale_recv, scale_bytes)
    deq = q_recv.view(torch.float8_e4m3fn).float() * scale_recv.view(torch.float32)
    return deq.view(world_size, -1).sum(dim=0).to(x.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Partial sums of a row-parallel layer: blocks of different magnitudes.
    total = ctx.world_size * case.params["n"]
    magnitude = torch.exp(ctx.randn(total // BLOCK, 1, dtype=torch.float32))
    x = ctx.randn(total // BLOCK, BLOCK, dtype=torch.float32) * magnitude
    return {"x": x.flatten().to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r keeps its own chunk and sends the other W-1 quantized: n one-byte codes and
    # n/128 four-byte scales each.
    n = case.params["n"]
    return (world_size - 1) * (n + 4 * (n // BLOCK))


PROBLEM = Problem(
    slug="tp-fp8-reducescatter",
    title="FP8-compressed reduce-scatter (blockwise e4m3)",
    category=Category.TENSOR,
    description=(
        "A reduce-scatter of partial sums that sends FP8 instead of full precision, as in "
        "FP8-communication tensor-parallel training. Every rank holds `x` (`W*n` elements, "
        "`n` a multiple of 128, bfloat16 or float32), seen as W chunks of `n`. Rank r "
        "returns `n` elements in `x`'s dtype: the sum over ranks j of chunk r of rank j's "
        "quantized-and-dequantized `x`, own chunk included.\n\n"
        "Quantization, exactly: split `x` into blocks of 128 contiguous elements; in float32, "
        "`amax = max |x|` over the block, `scale = amax / 448` (IEEE division; `scale = 1` "
        "for an all-zero block), code = `(x / scale)` clamped to ±448 and rounded to nearest "
        "even as `torch.float8_e4m3fn`. Dequantize as `code.float() * scale` and sum the W "
        "contributions in float32, then cast to `x`'s dtype.\n\n"
        "The reference quantizes with PyTorch ops and calls "
        "`torch.distributed.all_to_all_single` twice, on uint8 views of the codes and of "
        "the scales, then dequantizes and sums. Each rank must send its W-1 foreign chunks, "
        "n + n/32 bytes each; a fused kernel can quantize straight into the owners' buffers "
        "over symmetric memory (or read the peers' codes) and reduce on arrival."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Codes must match exactly; the W dequantized values are summed in float32 in any
    # order (a few float32 roundings), then rounded once to the output dtype (up to 2^-7
    # between two roundings of nearby values in bfloat16). One code off by one step moves
    # its contribution by 1/16 to 1/8 of itself, usually far outside these.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-3, rtol=2**-7),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 512}),
        Case("dev-bf16", "bfloat16", {"n": 1024}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-4m", "bfloat16", {"n": 1 << 22}),
    ),
)
