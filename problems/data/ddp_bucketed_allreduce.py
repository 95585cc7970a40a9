from __future__ import annotations

import math
from itertools import accumulate

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def param_shapes(vocab: int, hidden: int, layers: int) -> list[tuple[int, ...]]:
    """The parameters of a GPT-style model, in registration (parameter) order."""
    h = hidden
    block = [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,), (4 * h, h), (4 * h,)]
    block += [(h, 4 * h), (h,)]
    return [(vocab, h), *block * layers, (h,), (h,)]


def buckets(numels: list[int], itemsize: int, cap: int) -> list[tuple[int, int]]:
    """[lo, hi) element ranges of the flat buffer, in the order DDP reduces them.

    Parameters are taken from the last to the first (the order their gradients become
    ready in the backward pass); a bucket closes as soon as it holds `cap` bytes or more,
    so it may overshoot the cap by the parameter that crossed it.
    """
    ends = [0, *accumulate(numels)]
    result, hi, size = [], ends[-1], 0
    for index in reversed(range(len(numels))):
        size += numels[index] * itemsize
        if size >= cap:
            result.append((ends[index], hi))
            hi, size = ends[index], 0
    if hi > 0:
        result.append((0, hi))
    return result


def solution(
    grads: torch.Tensor, vocab: int, hidden: int, layers: int, bucket_cap: int
) -> tuple[torch.Tensor, ...]:
    world_size = dist.get_world_size()
    shapes = param_shapes(vocab, hidden, layers)
    numels = [math.prod(s) for s in shapes]
    # DDP scales each gradient by 1/W as it copies it into its bucket; W is a power of two,
    # so this is exact and the same as dividing the sum.
    flat = grads * (1.0 / world_size)
    # The flat buffer is in parameter order, so every bucket is one contiguous slice
    # (DDP's gradient_as_bucket_view): the all-reduce works on it in place.
    for lo, hi in buckets(numels, grads.element_size(), bucket_cap):
        dist.all_reduce(flat[lo:hi], op=dist.ReduceOp.SUM)
    offsets = accumulate(numels, initial=0)
    return tuple(flat[o : o + n].view(s) for o, n, s in zip(offsets, numels, shapes, strict=False))


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    total = sum(math.prod(s) for s in param_shapes(p["vocab"], p["hidden"], p["layers"]))
    return {
        # Unit-scale gradients, so that one tolerance per dtype holds for every size.
        "grads": ctx.randn(total),
        "vocab": p["vocab"],
        "hidden": p["hidden"],
        "layers": p["layers"],
        "bucket_cap": p["bucket_cap"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Every gradient is all-reduced once: 2(W-1)/W of the buffer per rank, bucketed or not.
    p = case.params
    total = sum(math.prod(s) for s in param_shapes(p["vocab"], p["hidden"], p["layers"]))
    return 2 * (world_size - 1) * total * case.itemsize // world_size


PROBLEM = Problem(
    slug="dp-ddp-bucketed-allreduce",
    title="DDP gradient averaging with reverse-order buckets",
    category=Category.DATA,
    description=(
        "The gradient synchronisation of PyTorch DistributedDataParallel: every rank has "
        "run the backward pass of the same GPT-style model on its own data and holds the "
        "gradients of all its parameters in one flat buffer `grads` `[P]` (float32 or "
        "bfloat16), laid out in parameter order, each parameter's gradient contiguous and "
        "row-major. The parameters, in order, for the ints `vocab` V, `hidden` H and "
        "`layers` L: the embedding `[V, H]`; then L times the block `ln1.weight [H]`, "
        "`ln1.bias [H]`, `qkv.weight [3H, H]`, `qkv.bias [3H]`, `proj.weight [H, H]`, "
        "`proj.bias [H]`, `ln2.weight [H]`, `ln2.bias [H]`, `fc1.weight [4H, H]`, "
        "`fc1.bias [4H]`, `fc2.weight [H, 4H]`, `fc2.bias [H]`; then `lnf.weight [H]`, "
        "`lnf.bias [H]` (P = VH + L(12H² + 13H) + 2H). Every rank returns a tuple of "
        "1 + 12L + 2 tensors in parameter order, each with its parameter's shape and "
        "`grads`' dtype: the average over ranks `Σ_r grads_r / W`.\n\n"
        "Precision, as DDP's default (no communication hook): each rank multiplies its "
        "gradient by 1/W in the dtype, then the scaled values are summed over ranks in the "
        "dtype (NCCL adds in the dtype, so bf16 partial sums are rounded). W is 2, 4 or 8, "
        "so the scaling is exact and the same as dividing the sum; the summation order is "
        "free.\n\n"
        "Buckets, as DDP forms them with `bucket_cap_mb`: walking the parameters from the "
        "last to the first, gradients join the open bucket until it holds at least "
        "`bucket_cap` bytes (an int input, like the other sizes), then it closes, so a "
        "bucket overshoots the cap by the parameter that crossed it (the embedding, the "
        "first parameter, is in the last bucket); the reference scales the buffer once and "
        "calls `torch.distributed.all_reduce` on each bucket's slice in that order, as DDP "
        "does when each bucket's gradients are ready. The buckets change no value: they are how "
        "DDP overlaps communication with the backward pass, and a kernel may reduce the "
        "buffer in any pieces. The whole buffer must cross the links once "
        "(2(W-1)/W of it per rank); a symmetric-memory kernel can reduce-scatter and "
        "all-gather with the scaling fused into the same pass, and pipeline buckets "
        "instead of paying one collective launch per bucket."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Sums of W addends of scale 1/W in another order: float32 differs by a few ulps of
    # values below ~2. In bf16 the W-1 rounded partial sums reach ~2 at worst (half an ulp
    # is 2^-8 there), so two orders differ by well under 2^-5 + 2% (measured: see
    # tests/problems/test_data.py); a missing or doubled rank moves an average by ~1/W.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=2**-5, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"vocab": 50, "hidden": 8, "layers": 2, "bucket_cap": 1024}),
        Case("dev-bf16", "bfloat16", {"vocab": 64, "hidden": 16, "layers": 2, "bucket_cap": 2048}),
    ),
    eval_cases=(
        # 41.6M parameters (166 MB), buckets of 25 MiB; the 65 MB embedding closes the last.
        Case(
            "demo-gpt-42m-fp32",
            "float32",
            {"vocab": 32000, "hidden": 512, "layers": 8, "bucket_cap": 25 << 20},
        ),
        # 84M parameters in bf16 (168 MB): about one bucket per transformer block.
        Case(
            "demo-gpt-84m-bf16",
            "bfloat16",
            {"vocab": 32768, "hidden": 1024, "layers": 4, "bucket_cap": 25 << 20},
        ),
    ),
)
