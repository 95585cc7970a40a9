from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem

QMAX = 127


def solution(grad: torch.Tensor, block: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    blocks = grad.view(-1, block)
    # One scale per block agreed by every rank: the largest magnitude anywhere.
    amax = blocks.abs().amax(dim=1)
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)
    # A tensor divisor, never a Python number: CUDA turns `t / 127` into `t * (1/127)`,
    # which is not the correctly rounded quotient.
    scale = amax / torch.full_like(amax, QMAX)
    quotient = blocks / scale[:, None]  # IEEE division; 0/0 in all-zero blocks ...
    quotient = torch.where(scale[:, None] > 0, quotient, 0.0)  # ... which code 0
    codes = quotient.round().clamp(-QMAX, QMAX).to(torch.int8).flatten()  # half to even
    # Reduce-scatter phase as an all-to-all of int8 chunks; the sums are exact in int32.
    received = torch.empty_like(codes)
    dist.all_to_all_single(received, codes)
    sums = received.view(world_size, -1).int().sum(dim=0)
    # |sum| <= 127·W fits int16: the all-gather moves two bytes per element (as uint8,
    # which every backend carries).
    gathered = torch.empty(2 * grad.numel(), dtype=torch.uint8, device=grad.device)
    dist.all_gather_into_tensor(gathered, sums.to(torch.int16).view(torch.uint8))
    total = gathered.view(torch.int16).float().view(-1, block)
    return ((total * scale[:, None]) / world_size).flatten()  # W a power of two: exact


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    n, block = p["n"], p["block"]
    # Blocks of different magnitudes (shared: a parameter's gradients have a similar scale
    # on every rank), each rank's values its own.
    exponent = ctx.randint(-12, 4, n // block, 1, shared=True).float()
    if p.get("grid"):
        # Half-integer multiples of 2^e up to ±126.5, and ±127·2^e on rank 0: the scale is
        # exactly 2^e and odd multiples of half a step are exact ties for the rounding.
        steps = ctx.randint(-253, 254, n // block, block).float() / 2
        if ctx.rank == 0:
            steps[:, 0] = QMAX * torch.where(steps[:, 0] < 0, -1.0, 1.0)
        grad = steps * torch.exp2(exponent)
    else:
        grad = ctx.randn(n // block, block, dtype=torch.float32) * torch.exp2(exponent)
    if p.get("zero_block"):
        grad[0] = 0.0  # zero on every rank: scale 0
        if ctx.rank == 0:
            grad[1] = 0.0  # zero on one rank only
    return {"grad": grad.flatten(), "block": block}


def bytes_moved(case: Case, world_size: int) -> int:
    # Per rank: the block maxima in an all-reduce (2(W-1)/W of n/B float32), the int8
    # codes of the other ranks' chunks ((W-1)/W of n bytes) and the int16 sums of its own
    # chunk to every peer ((W-1)/W of 2n bytes).
    n, block = case.params["n"], case.params["block"]
    scales = 2 * (world_size - 1) * (n // block) * 4 // world_size
    return scales + (world_size - 1) * 3 * n // world_size


PROBLEM = Problem(
    slug="dp-int8-compressed-allreduce",
    title="int8 blockwise-quantised gradient all-reduce, bit-exact",
    category=Category.DATA,
    description=(
        "A gradient all-reduce compressed to int8 with per-block scales, as in "
        "quantised data-parallel communication (DeepSpeed ZeRO++'s all-to-all based "
        "quantised gradient reduction), specified so that the result is exact. Every rank "
        "holds float32 `grad` `[n]` and the int `block` B (n a multiple of 8·B), seen as "
        "n/B blocks of B contiguous elements. Every rank returns the same float32 `[n]`:\n"
        "1. per block, `amax` = the largest `|grad|` in the block over all ranks;\n"
        "2. `scale = amax / 127` (float32, correctly rounded IEEE division);\n"
        "3. each rank's codes `q = clamp(round(grad / scale), −127, 127)` as int8, with "
        "`grad / scale` one correctly rounded float32 division (not a multiplication by a "
        "reciprocal) and `round` to nearest, ties to even; `q = 0` where `scale = 0` (an "
        "all-zero block);\n"
        "4. `s = Σ_r q_r`, exact in int32 whatever the order;\n"
        "5. `out = (float(s) · scale) / W`: one float32 multiplication rounded to nearest "
        "even, then a division by W = 2, 4 or 8, which is exact.\n"
        "The output is compared bit for bit: every code must match.\n\n"
        "The reference all-reduces the n/B block maxima with MAX, quantises, exchanges int8 "
        "chunks with `torch.distributed.all_to_all_single` (rank r receives chunk r of "
        "every rank), sums them in int32, all-gathers the sums as int16 (|s| ≤ 127·W) and "
        "dequantises. Per rank, n/B floats, (W−1)/W of n int8 codes and (W−1)/W of n int16 "
        "sums cross the links, against 2(W−1)/W of 4n bytes for a float32 all-reduce. A "
        "kernel can fuse the block maxima into the pass that reads the gradient, quantise "
        "straight into its peers' symmetric buffers once the maxima arrive, and "
        "dequantise as the sums come back."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Integer sums and single IEEE operations in a stated order: the answer has exact bits.
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 2048, "block": 64}),
        Case("dev-fp32-ties", "float32", {"n": 4096, "block": 128, "grid": 1, "zero_block": 1}),
    ),
    eval_cases=(
        Case("demo-16m-b256", "float32", {"n": 1 << 24, "block": 256, "zero_block": 1}),
        Case("demo-32m-b2048-ties", "float32", {"n": 1 << 25, "block": 2048, "grid": 1}),
    ),
)
