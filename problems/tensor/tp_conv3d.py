from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    local = F.conv3d(x, weight, bias, padding=1)
    batch, local_channels, *spatial = local.shape
    gathered = local.new_empty((world_size * batch, local_channels, *spatial))
    dist.all_gather_into_tensor(gathered, local)
    # [W*N, Cout/W, D, H, W] -> [N, W, Cout/W, ...]: rank r's channels at [r*Cout/W, ...).
    gathered = gathered.view(world_size, batch, local_channels, *spatial)
    return gathered.transpose(0, 1).reshape(batch, world_size * local_channels, *spatial)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    c_in, local_out = p["c_in"], p["c_out"] // ctx.world_size
    # Input replicated; filters and bias are this rank's output channels, scaled so the
    # outputs are of order 1.
    x = ctx.randn(p["batch"], c_in, p["depth"], p["height"], p["width"], shared=True)
    weight = ctx.randn(local_out, c_in, 3, 3, 3, dtype=torch.float32) * (27 * c_in) ** -0.5
    bias = 0.1 * ctx.randn(local_out, dtype=torch.float32)
    return {"x": x, "weight": weight.to(ctx.dtype), "bias": bias.to(ctx.dtype)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's Cout/W output channels must reach the W-1 peers.
    p = case.params
    local = p["batch"] * (p["c_out"] // world_size) * p["depth"] * p["height"] * p["width"]
    return (world_size - 1) * local * case.itemsize


PROBLEM = Problem(
    slug="tp-conv3d",
    title="Output-channel-parallel 3-D convolution with all-gather",
    category=Category.TENSOR,
    description=(
        "A 3-D convolution (kernel 3, stride 1, padding 1, with bias) whose output channels "
        "are split over ranks, as in video and volumetric models sharded across GPUs. Every "
        "rank holds the same input `x` (`[N, Cin, D, H, W]`) and its slice of the filters: "
        "`weight` (`[Cout/W, Cin, 3, 3, 3]`) and `bias` (`[Cout/W]`), output channels "
        "`[r*Cout/W, (r+1)*Cout/W)`. Every rank returns the full output "
        "`[N, Cout, D, H, W]` in the input dtype.\n\n"
        "The reference runs `torch.nn.functional.conv3d` on its slice, "
        "`torch.distributed.all_gather_into_tensor` on the `[N, Cout/W, D, H, W]` results and "
        "a transpose into channel order. Each rank must send its output slice to W-1 peers; "
        "a kernel can write finished output tiles straight into the peers' buffers over "
        "symmetric memory, overlapping the exchange with the convolution and skipping the "
        "transpose copy."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Sums of 27·Cin products in another order. float32 convolutions on GPUs may run in
    # TF32 (cuDNN's default, 10-bit mantissa): errors of ~1e-3 on outputs of size ~1.
    # bfloat16 adds one rounding of the output: neighbouring values differ by up to 2^-7.
    tolerances={
        "float32": Tolerance(atol=5e-3, rtol=5e-3),
        "bfloat16": Tolerance(atol=2e-2, rtol=1.6e-2),
    },
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"batch": 2, "c_in": 3, "c_out": 8, "depth": 4, "height": 5, "width": 6},
        ),
        Case(
            "dev-bf16",
            "bfloat16",
            {"batch": 1, "c_in": 8, "c_out": 16, "depth": 3, "height": 6, "width": 6},
        ),
    ),
    eval_cases=(
        Case(
            "demo-small",
            "bfloat16",
            {"batch": 1, "c_in": 64, "c_out": 64, "depth": 8, "height": 32, "width": 32},
        ),
        Case(
            "demo-vae",
            "bfloat16",
            {"batch": 1, "c_in": 128, "c_out": 128, "depth": 8, "height": 64, "width": 64},
        ),
    ),
)
