from __future__ import annotations

import torch
import torch.distributed as dist

from problems.graph._graph import (
    HOT_NODES,
    exchange,
    my_range,
    owners,
    partition_bounds,
    requested_ids,
    split_sizes,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(ids: torch.Tensor, grad: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    lo, hi = my_range(bounds, rank)
    # Every gradient row travels to the owner of its id as it is (no rounding on the
    # way); the owner adds them all up in float32 and rounds once.
    owner = owners(ids, bounds)
    order = torch.sort(owner, stable=True).indices
    send, recv = split_sizes(torch.bincount(owner, minlength=world_size))
    targets = exchange(ids[order], send, recv)
    rows = exchange(grad[order], send, recv)
    out = torch.zeros(hi - lo, grad.shape[1], dtype=torch.float32, device=grad.device)
    out.index_add_(0, targets - lo, rows.float())
    return out.to(grad.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    bounds = partition_bounds(case, ctx)
    ids = requested_ids(case, ctx, bounds)
    return {"ids": ids, "grad": ctx.randn(len(ids), case.params["feat"]), "bounds": bounds}


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value: (W-1)/W of this rank's mean `requests` rows belong to peers. The
    # uniform ones rarely repeat within one sender, so each travels; the hot ones can be
    # pre-summed per hub node, in float32 so that nothing is rounded twice.
    p = case.params
    uniform = p["requests"] * (100 - p.get("hot", 0)) / 100
    hot = HOT_NODES if p.get("hot", 0) else 0
    row = p["feat"] * case.itemsize
    per_rank = (uniform * row + hot * p["feat"] * 4) * (world_size - 1) / world_size
    return max(1, round(per_rank))


PROBLEM = Problem(
    slug="graph-feature-exchange-backward",
    title="Scatter-add of node-feature gradients to their owners (feature exchange backward)",
    category=Category.GRAPH,
    description=(
        "The backward half of the node-feature exchange of distributed GNN training with "
        "learnable node embeddings (DistDGL's `DistEmbedding` and sparse optimisers, PyG's "
        "distributed training): each rank has gradients for the rows it fetched, and each "
        "owner must receive and sum every gradient aimed at its nodes. Every rank holds "
        "the same `bounds` `[W+1]` (int64: rank r owns global ids "
        "`[bounds[r], bounds[r+1])`; ragged sizes, one empty in some cases); rank r holds "
        "`ids` `[M_r]` (int64 global ids, any order, its own nodes included, repeats "
        "allowed; M_r is ragged and 0 on some rank in some cases; in the `hot` cases a "
        "share of all requests goes to 16 hub nodes) and `grad` `[M_r, F]` (float32 or "
        "bf16), the gradient of row i of its fetch. Rank r returns `[N_r, F]` "
        "(N_r = bounds[r+1] − bounds[r]) in `grad`'s dtype: row j is the sum, over every "
        "rank q and every i with `ids_q[i] = bounds[r] + j`, of `grad_q[i]`; zeros for a "
        "node nobody asked for. Sums are accumulated in float32 from the exact input "
        "values and rounded to the dtype once.\n\n"
        "The reference sorts its rows by owner (stable), exchanges counts with an "
        "all-to-all, sends ids and gradient rows (in the input dtype, unrounded) with two "
        "ragged `all_to_all_single` calls, and the owner `index_add_`s them in float32. "
        "About (W−1)/W of the gradient rows must cross the links; rows of hub nodes can "
        "be pre-summed by the sender (in float32). Over symmetric memory a rank can "
        "atomically add its rows into the owner's float32 accumulator directly, with no "
        "id exchange, sort or staging."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Ordinary nodes sum a handful of unit-normal rows. A hub node sums thousands: its
    # float32 partial sums reach ~60 and another summation order moves the total by
    # ~1e-4 absolute, also when the total itself is near zero: hence atol 1e-3 for
    # float32, still 1000 times smaller than a lost or doubled unit-normal row. bf16
    # rounds once: two correct kernels differ by at most one ulp (under 2^-7 relative).
    tolerances={
        "float32": Tolerance(atol=1e-3, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
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
