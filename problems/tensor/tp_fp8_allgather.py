from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance
from problems.tensor._fp8 import BLOCK, quantize


def solution(x: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    q, scale = quantize(x)
    # Collectives move bytes: fp8 codes and float32 scales travel as uint8 views.
    q_bytes, scale_bytes = q.view(torch.uint8), scale.view(torch.uint8)
    q_all = q_bytes.new_empty((world_size * q_bytes.shape[0], BLOCK))
    scale_all = scale_bytes.new_empty((world_size * scale_bytes.shape[0], 4))
    dist.all_gather_into_tensor(q_all, q_bytes)
    dist.all_gather_into_tensor(scale_all, scale_bytes)
    deq = q_all.view(torch.float8_e4m3fn).float() * scale_all.view(torch.float32)
    return deq.to(x.dtype).flatten()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Blocks of different magnitudes, as in real activations, so the scales differ.
    n = case.params["n"]
    magnitude = torch.exp(ctx.randn(n // BLOCK, 1, dtype=torch.float32))
    x = ctx.randn(n // BLOCK, BLOCK, dtype=torch.float32) * magnitude
    return {"x": x.flatten().to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's n one-byte codes and n/128 four-byte scales must reach W-1 peers.
    n = case.params["n"]
    return (world_size - 1) * (n + 4 * (n // BLOCK))


PROBLEM = Problem(
    slug="tp-fp8-allgather",
    title="FP8-compressed all-gather (blockwise e4m3)",
    category=Category.TENSOR,
    description=(
        "An all-gather that halves its traffic by sending FP8, as in FP8 sequence- or "
        "tensor-parallel training. Every rank holds `x` (`n` elements, `n` a multiple of "
        "128, bfloat16 or float32). Every rank returns a `W*n` tensor in `x`'s dtype whose "
        "chunk j is rank j's `x` quantized and dequantized, including its own chunk.\n\n"
        "Quantization, exactly: split `x` into blocks of 128 contiguous elements; in float32, "
        "`amax = max |x|` over the block, `scale = amax / 448` (IEEE division; `scale = 1` "
        "for an all-zero block), code = `(x / scale)` clamped to ±448 and rounded to nearest "
        "even as `torch.float8_e4m3fn`. Dequantization: `code.float() * scale` in float32, "
        "then cast to `x`'s dtype. Outputs are compared to within one rounding of that "
        "dtype, so the codes must match exactly.\n\n"
        "The reference quantizes with PyTorch ops and calls "
        "`torch.distributed.all_gather_into_tensor` twice, on uint8 views of the codes and "
        "of the scales. Each rank must send n + n/32 bytes to each of the W-1 peers instead "
        "of n·itemsize; a fused kernel can quantize once, write codes and scales into every "
        "peer's buffer over symmetric memory and dequantize on arrival."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # The codes must match bit for bit; only the final cast may land on a neighbouring
    # value (one unit in the last place: at most 2^-23 relative in float32, 2^-7 in
    # bfloat16). A code one step off moves its element by 1/16 to 1/8, far outside.
    tolerances={
        "float32": Tolerance(atol=0.0, rtol=2**-23),
        "bfloat16": Tolerance(atol=0.0, rtol=2**-7),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1024}),
        Case("dev-bf16", "bfloat16", {"n": 2048}),
    ),
    eval_cases=(
        Case("demo-1m", "bfloat16", {"n": 1 << 20}),
        Case("demo-8m", "bfloat16", {"n": 1 << 23}),
    ),
)
