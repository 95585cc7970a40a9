from __future__ import annotations

import torch

from problems.graph._graph import even_bounds, expected_unique, fetch_rows, ragged_count
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    # Row-wise sharding: rank r holds rows [r·V/W, (r+1)·V/W). Every id travels to its
    # shard (no deduplication, as a plain row-wise sharded lookup does) and its row comes
    # back; the requester puts the rows back in input order.
    return fetch_rows(table, ids, even_bounds(table.shape[0], table.device), dedupe=False)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    shard = p["rows"] // ctx.world_size
    hot_shard = ctx.choice(ctx.world_size)
    n = ragged_count(ctx, p["ids"], empty=ctx.rank == p.get("empty_rank", -1))
    # `skew` percent of the ids fall in one shard (the same for every rank, drawn per
    # trial): the hot rows of a popularity-skewed table; the rest are uniform.
    skewed = hot_shard * shard + ctx.randint(0, shard, n)
    uniform = ctx.randint(0, p["rows"], n)
    ids = torch.where(ctx.randint(0, 100, n) < p.get("skew", 0), skewed, uniform)
    return {"table": ctx.randn(shard, p["dim"]), "ids": ids}


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value for the busiest shard (the hot one when skewed): each peer sends it
    # ids·(skew + (1 - skew)/W) ids out of V/W rows and needs each distinct row once.
    p = case.params
    skew = p.get("skew", 0) / 100
    draws = p["ids"] * (skew + (1 - skew) / world_size)
    rows = expected_unique(draws, p["rows"] / world_size)
    return max(1, round((world_size - 1) * rows * p["dim"] * case.itemsize))


PROBLEM = Problem(
    slug="graph-sharded-embedding-lookup",
    title="Row-wise sharded embedding lookup with ragged id batches",
    category=Category.GRAPH,
    description=(
        "A lookup in an embedding table sharded row-wise across ranks, as torchrec's "
        "row-wise sharding, DGL/GraphStorm's distributed node embeddings and "
        "HugeCTR/DeepRec's model-parallel embeddings do it. The table has V rows "
        "(V divisible by W); rank r holds `table` `[V/W, D]` (float32 or bf16), rows "
        "`[r·V/W, (r+1)·V/W)`, and a batch of `ids` `[n_r]` (int64 in `[0, V)`; n_r is "
        "ragged and 0 on some rank in some cases; ids repeat; in the `skew` cases that "
        "share of every rank's ids falls in one shard, chosen per trial, so that shard "
        "serves most of the batch). Rank r returns `[n_r, D]` in the table's dtype, row i "
        "the table's row `ids[i]`: an exact copy, compared bit for bit. No pooling.\n\n"
        "The reference buckets the ids by shard (a stable sort by owner), exchanges "
        "counts with an all-to-all, sends the ids with a ragged `all_to_all_single`, "
        "gathers the rows on the owner, sends them back with a second ragged all-to-all "
        "and restores input order. Every id and every row travels, duplicates included, "
        "and the hot shard in the skewed cases serves far more rows than the others. "
        "Only one row per distinct (id, requester) pair must cross the links; over "
        "symmetric memory a rank can read its rows straight out of the owners' shards "
        "in input order, with no id exchange."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"rows": 64, "dim": 8, "ids": 40}),
        Case("dev-bf16", "bfloat16", {"rows": 256, "dim": 16, "ids": 100}),
        Case(
            "dev-skew-empty",
            "float32",
            {"rows": 128, "dim": 8, "ids": 80, "skew": 90, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case("demo-4m-bf16", "bfloat16", {"rows": 1 << 22, "dim": 128, "ids": 65536}),
        Case(
            "demo-2m-skew-empty",
            "float32",
            {"rows": 1 << 21, "dim": 128, "ids": 131072, "skew": 80, "empty_rank": 1},
        ),
    ),
)
