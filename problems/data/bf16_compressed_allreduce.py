from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(grad: torch.Tensor, error: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    # Error feedback: last step's rounding residual rejoins the gradient before compressing.
    corrected = grad + error
    compressed = corrected.to(torch.bfloat16)
    residual = corrected - compressed.float()  # exact: the low 16 bits of the mantissa
    # Reduce-scatter phase as an all-to-all of bf16 chunks: rank r receives chunk r of
    # every rank, in rank order.
    received = torch.empty_like(compressed)
    dist.all_to_all_single(received, compressed)
    chunks = received.view(world_size, -1)
    # A fixed left-to-right float32 sum over ranks 0..W-1, so the result has exact bits.
    total = chunks[0].float()
    for r in range(1, world_size):
        total = total + chunks[r].float()
    mine = (total / world_size).to(torch.bfloat16)  # W is a power of two: exact division
    averaged = torch.empty_like(compressed)
    dist.all_gather_into_tensor(averaged, mine)
    return averaged.float(), residual


def make_inputs(case: Case, ctx: InputContext) -> dict:
    n = case.params["n"]
    # Gradients whose magnitudes spread over several orders (per element), so that the
    # order of the float32 sum over ranks changes the rounding of many elements.
    grad = ctx.randn(n, dtype=torch.float32) * torch.exp(2 * ctx.randn(n, dtype=torch.float32))
    # The previous step's residual is exactly what bf16 rounding of a similar gradient
    # leaves: at most half a bf16 ulp of it.
    previous = ctx.randn(n, dtype=torch.float32) * torch.exp(2 * ctx.randn(n, dtype=torch.float32))
    error = previous - previous.to(torch.bfloat16).float()
    _plant(grad, error, case.params.get("planted", 0), ctx)
    return {"grad": grad, "error": error}


def _plant(grad: torch.Tensor, error: torch.Tensor, count: int, ctx: InputContext) -> None:
    """Elements whose sum depends on the order: rank 0 holds m, rank 1 m·2^-8 (a bf16 tie
    above m) and every other rank m·2^-24 (half a float32 ulp of m). In rank order the tiny
    terms round away and the tie rounds to even (m); summed first, they tip it up."""
    if not count:
        return
    where = torch.arange(count, device=grad.device) * (grad.numel() // count)
    sign = torch.where(ctx.randint(0, 2, count, shared=True) > 0, 1.0, -1.0)
    magnitude = torch.exp2(ctx.randint(-20, 8, count, shared=True).float())
    fraction = 1.0 if ctx.rank == 0 else 2.0**-8 if ctx.rank == 1 else 2.0**-24
    grad[where] = (sign * magnitude * fraction).to(grad.device)
    error[where] = 0.0


def bytes_moved(case: Case, world_size: int) -> int:
    # A bf16 all-reduce: 2(W-1)/W of the n two-byte values per rank (half of float32's).
    return 2 * (world_size - 1) * case.params["n"] * 2 // world_size


PROBLEM = Problem(
    slug="dp-bf16-compressed-allreduce",
    title="bf16-compressed gradient all-reduce with error feedback, bit-exact",
    category=Category.DATA,
    description=(
        "Gradient compression for data parallelism, as PyTorch DDP's `bf16_compress_hook` "
        "(and DeepSpeed's compressed communication) do it, with error feedback and with a "
        "reduction whose result is fixed to the bit. Every rank holds float32 `grad` "
        "`[n]` and `error` `[n]`, the residual its previous step left (n a multiple of "
        "8). Every rank returns `(averaged [n], residual [n])`, both float32:\n"
        "1. `v = grad + error` (float32 add, round to nearest even);\n"
        "2. `c = bf16(v)` (round to nearest even), and `residual = v − float(c)`, which is "
        "exact;\n"
        "3. `s = (((c₀ + c₁) + c₂) + … + c_{W−1})`, every rank's `c` widened to float32 and "
        "added in rank order 0, 1, …, W−1, each addition rounded to float32;\n"
        "4. `averaged = float(bf16(s / W))`: W is 2, 4 or 8, so the division is exact; one "
        "rounding to bf16 (nearest even). `averaged` is the same on every rank; "
        "`residual` is the rank's own.\n"
        "Both outputs are compared bit for bit: a kernel must add in rank order, not in a "
        "ring's or a tree's order. For most elements another order happens to give the "
        "same bits, but the cases plant elements where it does not (rank 0 holds m, rank 1 "
        "m·2^-8, the others m·2^-24).\n\n"
        "The reference computes `c` and the residual locally, exchanges bf16 chunks with "
        "`torch.distributed.all_to_all_single` so that rank r holds chunk r of every rank, "
        "sums them in rank order, rounds its averaged chunk to bf16 and all-gathers the "
        "chunks (`all_gather_into_tensor`). Only bf16 crosses the links: 2(W-1)/W of "
        "2n bytes per rank, half a float32 all-reduce. A symmetric-memory kernel can read "
        "its chunk from every peer's compressed buffer in rank order, reduce and round it "
        "in registers and write the bf16 result into every peer's output, fusing the "
        "compression, the residual and the decompression into the same passes."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Every step is one IEEE operation in a stated order: the answer has exact bits.
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000, "planted": 10}),
        Case("dev-fp32-4k", "float32", {"n": 4096}),
    ),
    eval_cases=(
        Case("demo-16m", "float32", {"n": 1 << 24, "planted": 4096}),
        Case("demo-32m", "float32", {"n": 1 << 25, "planted": 4096}),
    ),
)
