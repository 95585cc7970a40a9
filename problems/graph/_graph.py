"""Partitions, random graphs and row exchanges shared by the graph problems.

Not a problem module (it defines no PROBLEM); the registry skips it.

Nodes (or embedding rows) are split into W contiguous ranges of global ids: rank r owns
`[bounds[r], bounds[r+1])`. Every generator here is vectorised torch on the context's
device, so a graph of a million nodes is drawn in milliseconds on a GPU.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, InputContext


def ragged_count(ctx: InputContext, mean: int, *, empty: bool = False) -> int:
    """A count of this rank alone, uniform in [mean - mean//2, mean + mean//2], or 0."""
    if empty:
        return 0
    return int(ctx.randint(mean - mean // 2, mean + mean // 2 + 1, 1).item())


def partition_bounds(case: Case, ctx: InputContext) -> torch.Tensor:
    """`[W + 1]` int64 offsets of W contiguous ragged partitions, equal on every rank.

    Sizes are uniform in [n - n//2, n + n//2] for n = params["nodes"], drawn from the
    shared stream (so every rank draws them first, with the same shape), and 0 for
    params["empty_rank"] when the case has one.
    """
    n = case.params["nodes"]
    sizes = ctx.randint(n - n // 2, n + n // 2 + 1, ctx.world_size, shared=True)
    empty = case.params.get("empty_rank", -1)
    if 0 <= empty < ctx.world_size:
        sizes[empty] = 0
    return torch.cat([sizes.new_zeros(1), sizes.cumsum(0)])


def even_bounds(rows_per_rank: int, device: torch.device) -> torch.Tensor:
    """The bounds of an even row sharding: rank r owns [r·rows, (r+1)·rows)."""
    world_size = dist.get_world_size()
    return torch.arange(world_size + 1, device=device) * rows_per_rank


def my_range(bounds: torch.Tensor, rank: int) -> tuple[int, int]:
    lo, hi = bounds[rank : rank + 2].tolist()
    return lo, hi


def owners(ids: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    """The rank owning each global id. `right=True` skips empty partitions: an id equal to
    the start of several ranges belongs to the last of them, the one that is not empty."""
    return torch.searchsorted(bounds, ids, right=True) - 1


def exchange(rows: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
    """Ragged all-to-all along dim 0: `send[q]` rows go to rank q, `recv[q]` come from q."""
    out = rows.new_empty(sum(recv), *rows.shape[1:])
    dist.all_to_all_single(out, rows.contiguous(), recv, send)
    return out


def split_sizes(send: torch.Tensor) -> tuple[list[int], list[int]]:
    """Every peer learns how many rows this rank sends it: one all-to-all of W counts."""
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return send.tolist(), recv.tolist()


def fetch_rows(
    table: torch.Tensor, ids: torch.Tensor, bounds: torch.Tensor, *, dedupe: bool = True
) -> torch.Tensor:
    """`table[ids - lo]` over the owners' shards: `[len(ids), *row]` in the table's dtype.

    Each id's owner is asked for its row. With `dedupe` a rank asks once per distinct id
    (the unique ids come sorted, hence grouped by owner); without, every id travels, in
    owner order, as a sparse-feature lookup without deduplication does.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if dedupe:
        keys, inverse = torch.unique(ids, return_inverse=True)
    else:
        order = torch.sort(owners(ids, bounds), stable=True).indices
        keys = ids[order]
    send, recv = split_sizes(torch.bincount(owners(keys, bounds), minlength=world_size))
    asked = exchange(keys, send, recv)
    lo, _ = my_range(bounds, rank)
    got = exchange(table[asked - lo], recv, send)
    if dedupe:
        return got[inverse]
    out = torch.empty_like(got)
    out[order] = got
    return out


def in_edges(
    ctx: InputContext, bounds: torch.Tensor, degree: int, local_pct: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random in-edges of this rank's nodes: `(src [E] global ids, dst [E] local ids)`.

    In-degrees are uniform in [0, 2·degree] (a node without in-edges is common at small
    degrees); a source is drawn from the node's own partition with probability
    local_pct/100 (a good partitioner keeps most edges inside a part) and from all nodes
    otherwise. Multi-edges and self-loops occur. Edges come in random order.
    """
    lo, hi = my_range(bounds, ctx.rank)
    total = int(bounds[-1].item())
    deg = ctx.randint(0, 2 * degree + 1, hi - lo)
    dst = torch.repeat_interleave(torch.arange(hi - lo, device=ctx.device), deg)
    n = len(dst)
    local = ctx.randint(0, 100, n) < local_pct
    src = torch.where(local, lo + ctx.randint(0, max(hi - lo, 1), n), ctx.randint(0, total, n))
    order = torch.randperm(n, generator=ctx.gen(), device=ctx.device)
    return src[order], dst[order]


# How many hot nodes the `hot` share of feature requests goes to.
HOT_NODES = 16


def requested_ids(case: Case, ctx: InputContext, bounds: torch.Tensor) -> torch.Tensor:
    """`[M_r]` global node ids this rank asks for: uniform over all nodes (its own
    included, with repeats), except that params["hot"] percent go to HOT_NODES shared
    hot nodes (the hubs of a power-law graph). M_r is ragged, 0 on params["idle_rank"]."""
    p = case.params
    hot_nodes = ctx.randint(0, int(bounds[-1].item()), HOT_NODES, shared=True)
    m = ragged_count(ctx, p["requests"], empty=ctx.rank == p.get("idle_rank", -1))
    uniform = ctx.randint(0, int(bounds[-1].item()), m)
    hot = hot_nodes[ctx.randint(0, HOT_NODES, m)]
    return torch.where(ctx.randint(0, 100, m) < p.get("hot", 0), hot, uniform)


def expected_unique(draws: float, pool: float) -> float:
    """Expected number of distinct values among `draws` uniform draws from `pool` values."""
    if pool <= 0:
        return 0.0
    return pool * -math.expm1(-draws / pool)
