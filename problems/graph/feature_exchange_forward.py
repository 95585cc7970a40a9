from __future__ import annotations

import torch

from problems.graph._graph import (
    HOT_NODES,
    expected_unique,
    fetch_rows,
    my_range,
    partition_bounds,
    requested_ids,
)
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, ids: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    # Every requested id goes to its owner once, however often it is requested; the
    # owner answers with its rows and the requester expands them back to request order.
    return fetch_rows(x, ids, bounds)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    bounds = partition_bounds(case, ctx)
    ids = requested_ids(case, ctx, bounds)
    lo, hi = my_range(bounds, ctx.rank)
    return {"x": ctx.randn(hi - lo, case.params["feat"]), "ids": ids, "bounds": bounds}


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value, as if every partition held the mean `nodes` = n: each peer asks
    # this partition for requests·(1 - hot)/W uniform ids (n possible) plus the hot nodes
    # that lie here (HOT_NODES/W), and needs each distinct row once.
    p = case.params
    n, uniform = p["nodes"], p["requests"] * (100 - p.get("hot", 0)) / 100
    rows = expected_unique(uniform / world_size, n) + HOT_NODES / world_size
    return max(1, round((world_size - 1) * rows * p["feat"] * case.itemsize))


PROBLEM = Problem(
    slug="graph-feature-exchange-forward",
    title="Distributed node-feature fetch (feature exchange forward)",
    category=Category.GRAPH,
    description=(
        "The forward half of the node-feature exchange of distributed GNN training "
        "(DistDGL's `DistTensor` pulls from its KVStore, PyG's distributed feature store, "
        "GraphLearn): node features are sharded by contiguous ranges of global ids and "
        "every rank asks for the rows of an arbitrary list of nodes, e.g. the frontier of "
        "its sampled mini-batch. Every rank holds the same `bounds` `[W+1]` (int64: rank r "
        "owns global ids `[bounds[r], bounds[r+1])`; partition sizes are ragged and one is "
        "empty in some cases); rank r holds `x` `[N_r, F]` (float32 or bf16, "
        "N_r = bounds[r+1] − bounds[r]), the features of its nodes in id order, and `ids` "
        "`[M_r]` (int64 global ids in `[0, N)`, any order, its own nodes included, "
        "repeats allowed; M_r is ragged and 0 on some rank in some cases; in the `hot` "
        "cases a share of all requests goes to 16 hub nodes). Rank r returns "
        "`x_global[ids]` `[M_r, F]` in `x`'s dtype, row i for `ids[i]`: an exact copy, "
        "compared bit for bit.\n\n"
        "The reference deduplicates the requests (`torch.unique`), sends each owner the "
        "distinct ids it owns (an all-to-all of counts, then a ragged `all_to_all_single` "
        "of ids), gathers the rows on the owner, sends them back with a second ragged "
        "all-to-all and expands them to request order. Only one row per distinct "
        "(node, requester) pair must cross the links; the id round trip and the host "
        "syncs on the counts are latency. Over symmetric memory a rank can read the rows "
        "straight from its peers' `x` in request order, with no id exchange at all."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"nodes": 50, "feat": 8, "requests": 60}),
        Case("dev-bf16", "bfloat16", {"nodes": 80, "feat": 16, "requests": 100, "hot": 30}),
        Case(
            "dev-empty-idle",
            "float32",
            {"nodes": 40, "feat": 8, "requests": 50, "hot": 10, "empty_rank": 1, "idle_rank": 0},
        ),
    ),
    eval_cases=(
        Case("demo-256k-bf16", "bfloat16", {"nodes": 262144, "feat": 128, "requests": 131072}),
        Case(
            "demo-128k-hot-empty",
            "float32",
            {
                "nodes": 131072,
                "feat": 256,
                "requests": 65536,
                "hot": 10,
                "empty_rank": 1,
                "idle_rank": 0,
            },
        ),
    ),
)
