"""The flat-parameter layout of an FSDP-wrapped linear layer, shared by fsdp-layer-forward
and fsdp-layer-backward.

A linear layer with `weight` [N, K] and `bias` [N] is one flat parameter, as FSDP1's
FlatParameter (use_orig_params) holds it: the weight row-major, then the bias, then zeros
up to the next multiple of W; rank r holds elements [r·F/W, (r+1)·F/W) of the F-element
whole.

Not a problem module (it defines no PROBLEM); the registry skips it. A problem's version
covers it (problems.spec hashes the catalog modules a problem uses).
"""

from __future__ import annotations

import torch

from problems.spec import InputContext


def flat_numel(n: int, k: int, world_size: int) -> int:
    """F: N·K + N rounded up to a multiple of W."""
    return -(-(n * k + n) // world_size) * world_size


def draw_flat_shard(
    ctx: InputContext, n: int, k: int, weight_std: float, bias_std: float
) -> torch.Tensor:
    """This rank's [F/W] slice: N(0, weight_std²) weights, N(0, bias_std²) biases, zero
    padding. Elements are independent, so each rank draws only its own slice."""
    size = flat_numel(n, k, ctx.world_size) // ctx.world_size
    position = torch.arange(size, device=ctx.device) + ctx.rank * size
    std = torch.where(
        position < n * k,
        weight_std,
        torch.where(position < n * k + n, bias_std, 0.0),
    )
    return (ctx.randn(size, dtype=torch.float32) * std).to(ctx.dtype)


def unflatten(flat: torch.Tensor, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the gathered flat parameter: weight [N, K] and bias [N]."""
    return flat[: n * k].view(n, k), flat[n * k : n * k + n]
