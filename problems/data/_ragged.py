"""Ragged shard sizes shared by the data-parallel problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

from problems.spec import InputContext


def shard_sizes(ctx: InputContext, total: int, *, empty_rank: int = -1) -> list[int]:
    """Every rank's share of `total` rows: ragged, drawn per trial, the same on every rank.

    Each rank gets 1 to 4 shares (so the largest shard is about four times the smallest at
    most) and at least one row; `empty_rank` >= 0 gets none, as a rank whose sampler ran
    dry. Drawn from the shared
    stream so that every rank knows every size (and so its own offset) without talking.
    """
    shares = ctx.randint(1, 5, ctx.world_size, shared=True).cpu()
    if empty_rank >= 0:
        shares[empty_rank % ctx.world_size] = 0
    # One row for every rank that has any, the rest in proportion to the shares; the
    # rounding remainder goes to the last rank that has rows.
    present = (shares > 0).long()
    rest = total - int(present.sum())
    sizes = present + (shares * rest) // shares.sum()
    sizes[int(present.nonzero()[-1])] += total - int(sizes.sum())
    return [int(s) for s in sizes]
