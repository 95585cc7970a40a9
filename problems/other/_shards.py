"""Ragged shards and order-preserving integer keys shared by the other-category problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, InputContext

# Global ids and positions stay below 2**32, so an id fits in the low half of an int64 key.
LOW = 1 << 32


def shard_size(case: Case, ctx: InputContext) -> int:
    """This rank's element count: uniform in [n - n//2, n + n//2], or 0 on `empty_rank`.

    Drawn from the rank's own stream, so sizes differ by rank and by trial and no rank
    knows another's size without asking.
    """
    n = case.params["n"]
    if ctx.rank == case.params.get("empty_rank", -1):
        return 0
    return int(ctx.randint(n - n // 2, n + n // 2 + 1, 1).item())


def all_sizes(n_local: int, device: torch.device) -> list[int]:
    """Every rank's element count, in rank order (one all-gather of an int64)."""
    sizes = torch.empty(dist.get_world_size(), dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(sizes, torch.tensor([n_local], device=device))
    return sizes.tolist()


def ordered_bits(values: torch.Tensor) -> torch.Tensor:
    """int64 in [-2**31, 2**31) ordered like the float values (float32, bf16 or fp16)."""
    bits = (values.float() + 0.0).view(torch.int32)  # + 0.0 turns -0.0 into +0.0
    # Negative floats order backwards as integers: flipping their magnitude bits fixes it.
    return torch.where(bits < 0, bits ^ 0x7FFF_FFFF, bits).long()


def bits_to_float(ordered: torch.Tensor) -> torch.Tensor:
    """The inverse of ordered_bits, as float32."""
    ordered = ordered.int()
    return torch.where(ordered < 0, ordered ^ 0x7FFF_FFFF, ordered).view(torch.float32)
