from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.geometric._grid import swap
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # The first and last depth planes ([C, 1, H, W], strided) go to the slabs before and
    # after; theirs come back, zeros beyond the volume's ends.
    before, after = swap(
        [
            (x[:, :1], rank - 1 if rank > 0 else None),
            (x[:, -1:], rank + 1 if rank + 1 < world_size else None),
        ]
    )
    padded = torch.cat([before, x, after], dim=1).float()[None]  # [1, C, D/W + 2, H, W]
    # Depth is padded already; height and width get the zero padding of `same`. bf16
    # values are exact in float32 (and in TF32), so the products are exact and the sums
    # are float32 whatever cuDNN picks.
    y = F.conv3d(padded, weight.float(), bias.float(), padding=(0, 1, 1))
    return y[0].to(x.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    c, depth = p["channels"], p["depth"] // ctx.world_size
    # Filters scaled by 1/sqrt(fan-in) so that outputs have unit scale.
    weight = ctx.randn(c, c, 3, 3, 3, shared=True, dtype=torch.float32) * (27 * c) ** -0.5
    bias = 0.1 * ctx.randn(c, shared=True, dtype=torch.float32)
    return {
        "x": ctx.randn(c, depth, p["height"], p["width"]),
        "weight": weight.to(ctx.dtype),
        "bias": bias.to(ctx.dtype),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A middle slab sends one [C, H, W] plane to each of its two neighbours.
    p = case.params
    planes = min(2, world_size - 1)
    return planes * p["channels"] * p["height"] * p["width"] * case.itemsize


PROBLEM = Problem(
    slug="geo-halo-conv3d",
    title="3-D convolution of a depth-split volume with halo exchange",
    category=Category.GEOMETRIC,
    description=(
        "A 3×3×3 convolution (stride 1, `same` zero padding, with bias) over a volume "
        "split along depth across ranks: the spatial parallelism of 3-D CNN training on "
        "volumes too large for one GPU (LBANN's hybrid-parallel CosmoFlow and 3-D U-Net, "
        "distributed medical segmentation, 3-D climate models) and of the depth- or "
        "time-split convolutions in parallel video VAE decoders. The "
        "volume is `[C, D, H, W]`; rank r holds depth planes `[r·D/W, (r+1)·D/W)` as `x` "
        "`[C, D/W, H, W]` (bf16 or float32), and every rank holds the same `weight` "
        "`[C, C, 3, 3, 3]` (output channel, input channel, kd, kh, kw) and `bias` `[C]` "
        "in `x`'s dtype. Rank r returns its planes of the output, `y` `[C, D/W, H, W]` "
        "in `x`'s dtype: `y[o, d, h, w] = bias[o] + Σ_{c, i, j, k} weight[o, c, i, j, k] · "
        "x[c, d+i−1, h+j−1, w+k−1]` over global coordinates, with x = 0 outside the "
        "volume (also beyond the first and last planes of the whole volume). Products "
        "and sums in float32, the result rounded to the dtype once (float32 inputs may "
        "use TF32, as cuDNN does by default).\n\n"
        "The reference swaps one plane with each neighbouring slab (`batch_isend_irecv`: "
        "its first plane to rank r−1, its last to rank r+1, C strided [H, W] pieces "
        "since channels are outermost), concatenates the planes received around its "
        "slab, casts to float32 and runs `torch.nn.functional.conv3d` with the depth "
        "already padded. The halo is one plane per side, a small fraction of the slab: "
        "a kernel can send it into the neighbours' symmetric buffers while the interior "
        "planes, which need nothing from anyone, are convolved, and finish the first "
        "and last output planes when the halos land, skipping the padded copy."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Outputs have unit scale. bf16: the products of bf16 values are exact in float32 and
    # 27·C of them are summed in some order (~1e-6), then rounded to bf16 once; two
    # correct kernels may land on either side of a rounding boundary, one ulp apart:
    # 2^-7 relative at most, plus the absolute floor near zero. float32: TF32 convolutions
    # (10-bit mantissa) err by ~1e-3 on outputs of order 1. A missing halo plane drops
    # a third of a boundary output's terms: an error of ~0.5.
    tolerances={
        "float32": Tolerance(atol=5e-3, rtol=5e-3),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"channels": 4, "depth": 16, "height": 6, "width": 5}),
        Case("dev-bf16", "bfloat16", {"channels": 8, "depth": 8, "height": 4, "width": 7}),
    ),
    eval_cases=(
        Case(
            "demo-c32-128cube",
            "bfloat16",
            {"channels": 32, "depth": 128, "height": 128, "width": 128},
        ),
        Case(
            "demo-c64-64cube",
            "bfloat16",
            {"channels": 64, "depth": 64, "height": 64, "width": 64},
        ),
    ),
)
