from __future__ import annotations

import torch
import torch.distributed as dist

from problems.graph._graph import (
    expected_unique,
    fetch_rows,
    in_edges,
    my_range,
    partition_bounds,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, bounds: torch.Tensor
) -> torch.Tensor:
    lo, hi = my_range(bounds, dist.get_rank())
    # One row per distinct source: local ones read in place, the halo (sources on other
    # ranks) fetched once from its owners. Then gather per edge and sum per destination.
    sources, slot = torch.unique(src, return_inverse=True)
    local = (sources >= lo) & (sources < hi)
    rows = x.new_empty(len(sources), x.shape[1])
    rows[local] = x[sources[local] - lo]
    rows[~local] = fetch_rows(x, sources[~local], bounds)
    summed = torch.zeros(hi - lo, x.shape[1], dtype=torch.float32, device=x.device)
    summed.index_add_(0, dst, rows.float()[slot])
    degree = torch.bincount(dst, minlength=hi - lo).clamp(min=1)
    return (summed / degree[:, None]).to(x.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    bounds = partition_bounds(case, ctx)
    lo, hi = my_range(bounds, ctx.rank)
    src, dst = in_edges(ctx, bounds, p["degree"], p["local"])
    return {"x": ctx.randn(hi - lo, p["feat"]), "src": src, "dst": dst, "bounds": bounds}


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value, as if every partition held the mean `nodes` = n: a peer draws
    # n·degree·(1 - local) sources uniformly over all W·n nodes, 1/W of them in this
    # partition, and needs each distinct one's row once. The requests (ids) can be
    # avoided by a kernel that reads its peers' features in place, so only rows count.
    p = case.params
    n, remote = p["nodes"], p["degree"] * (100 - p["local"]) / 100
    rows = expected_unique(n * remote / world_size, n)
    return max(1, round((world_size - 1) * rows * p["feat"] * case.itemsize))


PROBLEM = Problem(
    slug="graph-gnn-halo-aggregation",
    title="GNN mean aggregation with halo features across graph partitions",
    category=Category.GRAPH,
    description=(
        "The neighbour aggregation of a GraphSAGE-style mean aggregator in full-graph "
        "distributed GNN training (DistDGL, PyG's distributed training, DistGNN): the "
        "graph's N nodes are split into W contiguous ranges of global ids of ragged sizes "
        "(one range is empty in some cases) and every rank holds its nodes' in-edges. "
        "Every rank holds the same `bounds` `[W+1]` (int64: rank r owns global ids "
        "`[bounds[r], bounds[r+1])`, N_r = bounds[r+1] − bounds[r] nodes); rank r holds "
        "`x` `[N_r, F]` (float32 or bf16), the features of its nodes in id order, and the "
        "in-edges of its nodes as `src` `[E_r]` (int64 global id of the source, on any "
        "rank, its own included) and `dst` `[E_r]` (int64 local id of the destination, in "
        "`[0, N_r)`), in no particular order; multi-edges and self-loops occur and count "
        "once per edge. Rank r returns `h` `[N_r, F]` in `x`'s dtype: "
        "`h[i] = (Σ_{e: dst[e]=i} x_global[src[e]]) / deg(i)`, with deg(i) the number of "
        "edges into i; a node with no in-edges gets zeros. The sum is accumulated in "
        "float32 and divided in float32, then rounded to the dtype once.\n\n"
        "The reference takes the distinct sources, reads the local ones in place, sends "
        "each owner the remote ones it must serve (an all-to-all of counts, then a "
        "ragged `all_to_all_single` of ids), receives their feature rows with a second "
        "ragged all-to-all, then gathers per edge in float32 and `index_add_`s. What "
        "must cross the links is one feature row per distinct (halo node, requesting "
        "rank) pair; the id exchange and the host syncs on the counts are pure latency. "
        "A kernel can pull halo rows straight out of the owners' symmetric "
        "buffers while it aggregates the local edges, and aggregate without "
        "materialising one float32 message per edge."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # A mean of at most 2·degree unit-normal rows: float32 sums in another order move it
    # by a few 1e-7. bf16 rounds the result once (2^-9 relative), and two correct kernels
    # can land a float32 value on either side of a rounding boundary: one bf16 ulp, under
    # 2^-7 relative. A missing or doubled neighbour moves a mean of ~10 terms by ~0.1.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"nodes": 40, "feat": 8, "degree": 4, "local": 50}),
        Case("dev-bf16", "bfloat16", {"nodes": 64, "feat": 16, "degree": 6, "local": 30}),
        Case(
            "dev-empty-part",
            "float32",
            {"nodes": 30, "feat": 8, "degree": 2, "local": 0, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-128k-bf16",
            "bfloat16",
            {"nodes": 131072, "feat": 128, "degree": 4, "local": 70},
        ),
        Case(
            "demo-128k-empty-part",
            "float32",
            {"nodes": 131072, "feat": 128, "degree": 3, "local": 50, "empty_rank": 1},
        ),
    ),
)
