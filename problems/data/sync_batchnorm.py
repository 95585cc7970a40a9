from __future__ import annotations

import torch
import torch.distributed as dist

from problems.data._batchnorm import EPS, MOMENTUM, affine, batch_sizes, channel_stats
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _local_stats(x: torch.Tensor) -> torch.Tensor:
    """[count, mean (C), M2 (C)] of this rank's activations, float32; zeros when empty."""
    x32 = x.float()
    count = x.shape[0] * x.shape[2] * x.shape[3]
    mean = x32.sum(dim=(0, 2, 3)) / max(count, 1)
    m2 = ((x32 - mean[None, :, None, None]) ** 2).sum(dim=(0, 2, 3))
    # The count travels as float32 with the moments: exact below 2^24 elements.
    return torch.cat([mean.new_tensor([count]), mean, m2])


def solution(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    channels = x.shape[1]
    local = _local_stats(x)
    # Like PyTorch's SyncBatchNorm: every rank's (count, mean, M2), combined with Chan's
    # parallel formula, so a rank with no rows simply weighs nothing.
    world_size = dist.get_world_size()
    gathered = local.new_empty(world_size * local.numel())
    dist.all_gather_into_tensor(gathered, local)
    gathered = gathered.view(world_size, -1)
    counts, means, m2s = gathered[:, :1], gathered[:, 1 : 1 + channels], gathered[:, 1 + channels :]
    total = counts.sum()
    mean = (counts * means).sum(dim=0) / total
    var = (m2s + counts * (means - mean) ** 2).sum(dim=0) / total  # biased
    invstd = torch.rsqrt(var + EPS)
    scale = (invstd * weight)[None, :, None, None]
    y = (x.float() - mean[None, :, None, None]) * scale + bias[None, :, None, None]
    new_mean = (1 - MOMENTUM) * running_mean + MOMENTUM * mean
    new_var = (1 - MOMENTUM) * running_var + MOMENTUM * var * (total / (total - 1))
    return y.to(x.dtype), new_mean, new_var


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    channels = p["channels"]
    rows = batch_sizes(case, ctx)[ctx.rank]
    shift, scale = channel_stats(ctx, channels)
    # Shards are not identically distributed (each rank's activations sit 0.25·r higher),
    # so statistics of one rank alone are visibly wrong.
    x = ctx.randn(rows, channels, p["height"], p["width"], dtype=torch.float32)
    x = x * scale + shift + 0.25 * ctx.rank
    weight, bias = affine(ctx, channels)
    return {
        "x": x.to(ctx.dtype),
        "weight": weight,
        "bias": bias,
        "running_mean": 0.1 * ctx.randn(channels, shared=True, dtype=torch.float32),
        "running_var": 1 + 0.1 * ctx.randn(channels, shared=True, dtype=torch.float32).abs(),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's count and per-channel mean and M2 reach every peer (all-gather of
    # 1 + 2C float32). The activations never leave their rank.
    return (world_size - 1) * (1 + 2 * case.params["channels"]) * 4


PROBLEM = Problem(
    slug="dp-sync-batchnorm",
    title="SyncBatchNorm forward: global batch statistics over ragged batches",
    category=Category.DATA,
    description=(
        "The training-mode forward of PyTorch's `SyncBatchNorm` (as in data-parallel "
        "detection and segmentation models, where per-GPU batches are small): batch "
        "statistics over the global batch of every rank. Every rank holds `x` "
        "`[N_r, C, H, W]` (float32 or bfloat16; N_r differs between ranks and may be 0), "
        "and the same float32 `[C]` `weight`, `bias`, `running_mean` and `running_var`. "
        "eps = 1e-5, momentum = 0.1.\n\n"
        "With M = Σ_r N_r·H·W elements per channel over all ranks, in float32: `mean_c` "
        "and the biased `var_c = Σ (x − mean_c)² / M` over every rank's elements of "
        "channel c (any exact-in-math formula: Welford, Chan's merge, two passes; not a "
        "naive `E[x²] − E[x]²`, whose cancellation is not within the tolerance); "
        "`invstd = 1/√(var + eps)`. Every rank returns `(y [N_r, C, H, W] in x's dtype, "
        "running_mean [C], running_var [C] float32)`: `y = (x − mean)·invstd·weight + "
        "bias` computed in float32 and rounded once, `running_mean = 0.9·running_mean + "
        "0.1·mean` and `running_var = 0.9·running_var + 0.1·var·M/(M − 1)` (the unbiased "
        "variance), the same on every rank.\n\n"
        "The reference computes each rank's (count, mean, M2) per channel in float32, "
        "all-gathers the `[1 + 2C]` vectors (`all_gather_into_tensor`), merges them with "
        "Chan's parallel formula and normalises. Only 1 + 2C floats per rank cross the "
        "links: the problem is one pass over `x` for the statistics, one small collective "
        "and one pass to normalise. A kernel can publish each block's partial moments to "
        "its peers over symmetric memory as it goes and start normalising as soon as the "
        "last partials land; a rank with no rows only contributes zeros."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32 statistics over up to millions of elements in another order: ~1e-6 relative,
    # so y moves by ~1e-6 at its unit scale. bf16 y is rounded once (2^-8 relative) and a
    # float32 difference can tip that rounding: one ulp of |y| < 4 is at most 2^-6. The
    # running statistics are float32 in both cases. Statistics of one rank alone move y
    # by ~0.1 (shards are offset by 0.25 per rank).
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"batch": 3, "channels": 5, "height": 4, "width": 3}),
        Case(
            "dev-fp32-empty",
            "float32",
            {"batch": 2, "channels": 4, "height": 3, "width": 3, "empty_rank": 1},
        ),
        Case("dev-bf16", "bfloat16", {"batch": 4, "channels": 8, "height": 5, "width": 5}),
    ),
    eval_cases=(
        # ResNet-50's first stage: 25.7M elements per rank on average (N_r ragged, one rank
        # empty, the largest up to ~3x the mean at W = 8).
        Case(
            "demo-n32-c256-56-empty",
            "bfloat16",
            {"batch": 32, "channels": 256, "height": 56, "width": 56, "empty_rank": 1},
        ),
        # The stem's output at full resolution: 12.8M float32 elements per rank.
        Case(
            "demo-n16-c64-112",
            "float32",
            {"batch": 16, "channels": 64, "height": 112, "width": 112},
        ),
    ),
)
