"""FSDP2-style per-parameter shards and the gradient-clipping steps shared by the
fsdp-clip-grad-norm problems.

FSDP2 shards every parameter on dim 0 with torch.chunk: with R rows over P parts, part i
holds rows [i·c, min((i+1)·c, R)) where c = ceil(R / P), so the last parts may be short or
empty (R = 12 over 8 parts: 2, 2, 2, 2, 2, 2, 0, 0).

Not a problem module (it defines no PROBLEM); the registry skips it. A problem's version
covers it (problems.spec hashes the catalog modules a problem uses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from problems.spec import InputContext

# Added to the total norm before dividing, as torch.nn.utils.clip_grad_norm_ does.
CLIP_EPS = 1e-6


def chunk_bounds(rows: int, parts: int, index: int) -> tuple[int, int]:
    """[start, stop) of part `index` of `rows` rows under torch.chunk."""
    size = -(-rows // parts)
    return min(index * size, rows), min((index + 1) * size, rows)


def chunk_rows(rows: int, parts: int, index: int) -> int:
    start, stop = chunk_bounds(rows, parts, index)
    return stop - start


def draw_grad_shard(
    ctx: InputContext, shape: Sequence[int], parts: int, index: int, std: float
) -> torch.Tensor:
    """Part `index` of a gradient of `shape` (sharded on dim 0), N(0, std²) entries."""
    rows = chunk_rows(shape[0], parts, index)
    return (ctx.randn(rows, *shape[1:], dtype=torch.float32) * std).to(ctx.dtype)


def equal_share_std(norm: float, numel: int, tensors: int) -> float:
    """The std that gives a `numel`-element gradient a 1/`tensors` share of norm²: every
    tensor, however small, then moves the total norm when it is left out."""
    return norm / math.sqrt(tensors * numel)


def sum_of_squares(tensors: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """[1] float32: Σ x² over every element of every tensor (empty shards add nothing)."""
    total = torch.zeros(1, dtype=torch.float32, device=device)
    for t in tensors:
        total += t.float().square().sum()
    return total


def clip_in_place(
    tensors: Sequence[torch.Tensor], total_norm: torch.Tensor, max_norm: float
) -> None:
    """Scale every tensor in place by min(1, max_norm / (total_norm + 1e-6)), in float32."""
    coef = (max_norm / (total_norm + CLIP_EPS)).clamp(max=1.0)
    for t in tensors:
        t.mul_(coef)
