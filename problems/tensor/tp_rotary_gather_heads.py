from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

BASE = 10000.0
MAX_POSITION = 2048


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Half rotation: dims i and i + D/2 form the pair that turns by angle i.
    first, second = x.float().chunk(2, dim=-1)
    turned = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
    return turned.to(x.dtype)


def solution(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, local_heads, head_dim = q.shape
    world_size = dist.get_world_size()
    exponents = torch.arange(0, head_dim, 2, device=q.device, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / (BASE**exponents)
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    local = torch.stack([_rotate(q, cos, sin), _rotate(k, cos, sin)])
    gathered = local.new_empty((world_size * 2, tokens, local_heads, head_dim))
    dist.all_gather_into_tensor(gathered, local)
    # [W, 2, T, H/W, D] -> [2, T, W, H/W, D]: rank r's heads land at [r*H/W, (r+1)*H/W).
    gathered = gathered.view(world_size, 2, tokens, local_heads, head_dim)
    full = gathered.permute(1, 2, 0, 3, 4).reshape(2, tokens, world_size * local_heads, head_dim)
    return full[0], full[1]


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens, head_dim = case.params["t"], case.params["d"]
    local_heads = case.params["heads"] // ctx.world_size
    # Every rank serves the same tokens, so the positions agree; a packed batch of
    # sequences makes them arbitrary rather than 0..T-1.
    positions = ctx.randint(0, MAX_POSITION, tokens, shared=True)
    return {
        "q": ctx.randn(tokens, local_heads, head_dim),
        "k": ctx.randn(tokens, local_heads, head_dim),
        "positions": positions,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's rotated q and k heads must reach the W-1 peers.
    p = case.params
    local = 2 * p["t"] * (p["heads"] // world_size) * p["d"] * case.itemsize
    return (world_size - 1) * local


PROBLEM = Problem(
    slug="tp-rotary-gather-heads",
    title="Rotary embedding, then all-gather attention heads",
    category=Category.TENSOR,
    description=(
        "Attention heads split over ranks, gathered after the rotary embedding (as when a "
        "column-parallel QKV projection feeds a layer that needs every head). Rank r holds "
        "`q` and `k` (`[T, H/W, D]`, heads `[r*H/W, (r+1)*H/W)`) and the token positions "
        "`positions` (`[T]` int64, the same on every rank, in `[0, 2048)`). Every rank "
        "returns `(q_full, k_full)`, each `[T, H, D]` in the input dtype, with rank j's "
        "heads at `[j*H/W, (j+1)*H/W)` after rotation.\n\n"
        "Rotation (half-rotation, base 10000, computed in float32): "
        "`inv_freq[i] = 1 / 10000**(2i/D)`, `angle[t, i] = positions[t] * inv_freq[i]` for "
        "`i < D/2`; element i and element i + D/2 of each head form a pair "
        "`(a, b) -> (a cos - b sin, b cos + a sin)`. The result is rounded to the input "
        "dtype before the exchange.\n\n"
        "The reference rotates with PyTorch ops, stacks q and k and calls "
        "`torch.distributed.all_gather_into_tensor` once, then permutes the gathered "
        "`[W, 2, T, H/W, D]` into head order. Each rank must send its rotated heads to W-1 "
        "peers; a fused kernel can rotate and write straight into every peer's `[T, H, D]` "
        "outputs over symmetric memory, which also saves the permute copy."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Angles up to 2^11 rad held in float32 carry up to ~2.5e-4 rad of rounding, so a
    # kernel that forms them in another (equally valid) order moves an output of size ~6
    # by ~1.5e-3. bfloat16 adds one rounding to 8 significant bits (up to 2^-7 between
    # two roundings of nearby values).
    tolerances={
        "float32": Tolerance(atol=3e-3, rtol=1e-3),
        "bfloat16": Tolerance(atol=2e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 12, "heads": 8, "d": 16}),
        Case("dev-bf16", "bfloat16", {"t": 20, "heads": 16, "d": 32}),
    ),
    eval_cases=(
        Case("demo-1k-tokens", "bfloat16", {"t": 1024, "heads": 32, "d": 128}),
        Case("demo-4k-tokens", "bfloat16", {"t": 4096, "heads": 32, "d": 128}),
    ),
)
