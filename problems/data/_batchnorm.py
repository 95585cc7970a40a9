"""Inputs and constants shared by the synchronised batch-norm problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch

from problems.data._ragged import shard_sizes
from problems.spec import Case, InputContext

EPS = 1e-5
MOMENTUM = 0.1


def batch_sizes(case: Case, ctx: InputContext) -> list[int]:
    """Every rank's ragged batch size N_r: `batch` per rank on average, `empty_rank` none."""
    total = case.params["batch"] * ctx.world_size
    return shard_sizes(ctx, total, empty_rank=case.params.get("empty_rank", -1))


def channel_stats(ctx: InputContext, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel shift and scale of the activations (shared): channels differ, as after
    a convolution, so a kernel that mixes channels up fails."""
    shift = 0.5 * ctx.randn(channels, shared=True, dtype=torch.float32)
    scale = torch.exp(0.5 * ctx.randn(channels, shared=True, dtype=torch.float32))
    return shift[None, :, None, None], scale[None, :, None, None]


def affine(ctx: InputContext, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's float32 weight (around 1) and bias, the same on every rank."""
    weight = 1 + 0.25 * ctx.randn(channels, shared=True, dtype=torch.float32)
    bias = 0.1 * ctx.randn(channels, shared=True, dtype=torch.float32)
    return weight, bias
