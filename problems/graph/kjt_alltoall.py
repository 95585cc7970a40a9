from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.graph._graph import exchange
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _by_owner(num_features: int, world_size: int) -> torch.Tensor:
    """Feature ids grouped by the rank that owns their table (f % W), then ascending."""
    return torch.tensor([f for q in range(world_size) for f in range(q, num_features, world_size)])


def solution(lengths: torch.Tensor, values: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    num_features, batch = lengths.shape
    mine, dim = tables.shape[0], tables.shape[2]
    device = values.device
    owned = [len(range(q, num_features, world_size)) for q in range(world_size)]
    order = _by_owner(num_features, world_size).to(device)

    # Step 1 (the KJT all-to-all): each owner gets the lengths of its features for every
    # sample of every rank, then their ids. Values are feature-major, so regrouping the
    # features by owner is a stable sort of each value's feature rank in `order`.
    per_feature = lengths.sum(1)
    feature_of = torch.repeat_interleave(torch.arange(num_features, device=device), per_feature)
    position = torch.empty_like(order)
    position[order] = torch.arange(num_features, device=device)
    values = values[torch.sort(position[feature_of], stable=True).indices]
    got_lengths = exchange(
        lengths[order].reshape(-1), [n * batch for n in owned], [mine * batch] * world_size
    )
    send_values = torch.zeros(world_size, dtype=torch.int64, device=device)
    send_values.index_add_(0, torch.arange(num_features, device=device) % world_size, per_feature)
    recv_values = got_lengths.view(world_size, -1).sum(1)
    got_values = exchange(values, send_values.tolist(), recv_values.tolist())

    # The owner pools each (source rank, table, sample) bag: a float32 sum of its rows.
    bag = torch.repeat_interleave(torch.arange(len(got_lengths), device=device), got_lengths)
    rows = tables[(bag // batch) % max(mine, 1), got_values].float()
    pooled = torch.zeros(len(got_lengths), dim, dtype=torch.float32, device=device)
    pooled.index_add_(0, bag, rows)

    # Step 2 (the pooled-embedding all-to-all): each rank gets [tables of q, B, D] from
    # every owner q, rounded to the dtype once, and lays them out in key order.
    back = exchange(
        pooled.to(tables.dtype), [mine * batch] * world_size, [n * batch for n in owned]
    )
    out = back.new_empty(num_features, batch, dim)
    out[order] = back.view(num_features, batch, dim)
    return out.transpose(0, 1).reshape(batch, num_features * dim)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    features, world_size = p["features"], ctx.world_size
    # Pooling factors uniform in [0, 2·pooling]: empty bags are common at small means.
    lengths = ctx.randint(0, 2 * p["pooling"] + 1, features, p["batch"])
    if ctx.rank == p.get("empty_rank", -1):
        lengths[p["empty_feature"]] = 0
    mine = len(range(ctx.rank, features, world_size))
    return {
        "lengths": lengths,
        "values": ctx.randint(0, p["rows"], int(lengths.sum().item())),
        "tables": ctx.randn(mine, p["rows"], p["dim"]),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank 0 owns the most tables, ceil(F/W). Expected value: it sends the ids (8 bytes)
    # and lengths (8 bytes per bag) of the F - ceil(F/W) features it does not own, and
    # the pooled [B, D] of each of its tables to W-1 peers.
    p = case.params
    features, batch = p["features"], p["batch"]
    mine = math.ceil(features / world_size)
    ids = (features - mine) * batch * (p["pooling"] + 1) * 8
    pooled = (world_size - 1) * mine * batch * p["dim"] * case.itemsize
    return max(1, ids + pooled)


PROBLEM = Problem(
    slug="graph-kjt-alltoall",
    title="Keyed-jagged-tensor all-to-all with pooled embeddings (table-wise sharding)",
    category=Category.GRAPH,
    description=(
        "The sparse-feature path of a DLRM-style recommender with table-wise sharded "
        "embeddings, as torchrec's `KJTAllToAll` followed by its pooled-embeddings "
        "all-to-all does it (also HugeCTR and FBGEMM's TBE-based stacks). There are F "
        "sparse features (keys), each with its own table of V rows; feature f's table "
        "lives on rank `f % W`. Every rank holds a local batch of B samples as a keyed "
        "jagged tensor: `lengths` `[F, B]` (int64, the number of ids of feature f in "
        "sample b; 0 is common; in some cases one feature has no ids at all on one "
        "rank) and `values` `[Σ lengths]` (int64 ids in `[0, V)`, feature-major: all of "
        "feature 0's ids sample by sample, then feature 1's, ...). Rank r also holds "
        "`tables` `[T_r, V, D]` (float32 or bf16): the tables of features r, r+W, r+2W, "
        "... in that order (T_r = number of such features, 0 when F ≤ r). Rank r returns "
        "`[B, F·D]` in the tables' dtype: for sample b, the sum-pooled embedding of each "
        "feature's bag (the sum of the table rows of its ids, zeros for an empty bag), "
        "features in key order 0..F−1 along the last dim. Each bag is summed in float32 "
        "and rounded to the dtype once.\n\n"
        "The reference regroups `values` by owner, sends the lengths (equal splits of "
        "`T_q·B` per owner q) and then the ids (ragged splits: a host sync on the "
        "counts) with `all_to_all_single`, pools every (source rank, table, sample) bag "
        "on the owner with a float32 gather and `index_add_`, and returns the pooled "
        "`[T_r, B, D]` blocks with a third all-to-all, which the receiver lays out in key "
        "order. Ids cross the links once and pooled rows once; a kernel can pool as the "
        "ids arrive and write each pooled row straight into its requester's output, in "
        "place, over symmetric memory."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # A bag sums at most 2·pooling unit-normal rows in float32: another order moves it by
    # ~1e-6. bf16 rounds once: two correct kernels differ by at most one ulp (under 2^-7
    # relative). A missing or doubled id moves the bag by ~1.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"features": 5, "batch": 4, "pooling": 3, "rows": 32, "dim": 8},
        ),
        Case(
            "dev-bf16",
            "bfloat16",
            {"features": 3, "batch": 6, "pooling": 4, "rows": 64, "dim": 16},
        ),
        Case(
            "dev-empty-feature",
            "float32",
            {
                "features": 6,
                "batch": 5,
                "pooling": 1,
                "rows": 16,
                "dim": 8,
                "empty_rank": 1,
                "empty_feature": 2,
            },
        ),
    ),
    eval_cases=(
        Case(
            "demo-26f-bf16",
            "bfloat16",
            {"features": 26, "batch": 2048, "pooling": 8, "rows": 131072, "dim": 128},
        ),
        Case(
            "demo-8f-empty-feature",
            "float32",
            {
                "features": 8,
                "batch": 4096,
                "pooling": 4,
                "rows": 524288,
                "dim": 128,
                "empty_rank": 1,
                "empty_feature": 5,
            },
        ),
    ),
)
