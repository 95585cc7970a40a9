from __future__ import annotations

import torch
import torch.distributed as dist

from problems.data._ragged import shard_sizes
from problems.spec import EXACT, Case, Category, InputContext, Problem

LEVELS = 16  # coordinates are integers in [-16, 16]
CHUNK = 1 << 17  # database rows scored at a time: bounds the reference's memory
_NONE = torch.iinfo(torch.int64).max  # the key of a missing candidate (shard < k rows)


def _keys(dist2: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """int64 keys ordered by distance, then by lower id: a non-negative float32's bits
    order like the float, and ids < 2^31 fill the low half."""
    return (dist2.view(torch.int32).long() << 32) | ids


def _local_topk(queries: torch.Tensor, shard: torch.Tensor, offset: int, k: int) -> torch.Tensor:
    q = queries.float()
    best = torch.full((q.shape[0], k), _NONE, dtype=torch.int64, device=q.device)
    q_sq = (q * q).sum(dim=1, keepdim=True)
    for lo in range(0, shard.shape[0], CHUNK):
        x = shard[lo : lo + CHUNK].float()
        # Integer coordinates: every term and partial sum is an integer below 2^24, so this
        # float32 expansion is exact, like any other way of computing it.
        dist2 = q_sq - 2 * (q @ x.T) + (x * x).sum(dim=1)[None, :]
        ids = torch.arange(lo, lo + x.shape[0], device=q.device) + offset
        chunk = _keys(dist2, ids.expand_as(dist2))
        best = torch.cat([best, chunk], dim=1).topk(k, dim=1, largest=False).values
    return best


def solution(
    queries: torch.Tensor, database: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # Each rank knows only its own shard's size: the offsets come from an all-gather.
    counts = torch.empty(world_size, dtype=torch.int64, device=database.device)
    mine = torch.tensor([database.shape[0]], dtype=torch.int64, device=database.device)
    dist.all_gather_into_tensor(counts, mine)
    offset = int(counts[:rank].sum())
    candidates = _local_topk(queries, database, offset, k)  # [Q, k]
    gathered = candidates.new_empty(world_size * candidates.shape[0], k)
    dist.all_gather_into_tensor(gathered, candidates)
    merged = gathered.view(world_size, -1, k).permute(1, 0, 2).reshape(queries.shape[0], -1)
    best = merged.topk(k, dim=1, largest=False).values
    dist2 = (best >> 32).int().view(torch.float32)
    return dist2, best & 0xFFFF_FFFF


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    sizes = shard_sizes(ctx, p["rows"], empty_rank=p.get("empty_rank", -1))

    def grid(*shape: int, shared: bool = False) -> torch.Tensor:
        # Scalar-quantised embeddings: small integers, exact in bf16 and float32. Ties in
        # distance are common, so the id order among equals is tested.
        values = ctx.randint(-LEVELS, LEVELS + 1, *shape, shared=shared)
        return values.to(ctx.dtype)

    return {
        "queries": grid(p["queries"], p["dim"], shared=True),
        "database": grid(sizes[ctx.rank], p["dim"]),
        "k": p["k"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's k best (distance and id: 8 bytes) per query reach every peer, plus the
    # shard sizes. Ragged shards change nothing here: every rank sends k per query.
    p = case.params
    return (world_size - 1) * (p["queries"] * p["k"] * 8 + 8)


PROBLEM = Problem(
    slug="dp-distributed-knn",
    title="Exact k-nearest neighbours over a row-sharded database",
    category=Category.DATA,
    description=(
        "Brute-force k-nearest-neighbour search over a database sharded by rows across "
        "ranks, as FAISS's sharded GPU indexes (IndexShards) or a retrieval step of "
        "contrastive training run it. Every rank holds the same `queries` `[Q, D]` and "
        "its own shard `database` `[n_r, D]` (float32 or bfloat16), and the int `k`. "
        "Shard sizes are ragged and data-dependent, a shard may be empty, and each rank "
        "knows only its own n_r. Global ids: rank r's row i is `Σ_{r'<r} n_{r'} + i`. "
        "Vectors are scalar-quantised: every coordinate is an integer in [−16, 16], so "
        "squared distances are exact integers below 2^24 in float32 whatever the "
        "summation order or formula (`‖q‖² − 2q·x + ‖x‖²` or `Σ(q − x)²`, TF32 or bf16 "
        "tensor cores with float32 accumulation included).\n\n"
        "Every rank returns `(distances [Q, k] float32, ids [Q, k] int64)`, the same on "
        "every rank: per query the k rows of the whole database with the smallest squared "
        "L2 distance, ascending; among equal distances the lower global id first (ties are "
        "common). Both outputs are compared exactly. The whole database holds at least k "
        "rows.\n\n"
        "The reference all-gathers the shard sizes, scores its shard in chunks of 2^17 "
        "rows (one float32 GEMM each), keeps the k smallest per query as int64 keys "
        "(distance bits, then id), all-gathers the `[Q, k]` keys (a shard with fewer than "
        "k rows pads with the largest key) and merges them. Only k candidates per query "
        "and rank cross the links; the work is the 2·Q·n_r·D flops of scoring and the "
        "selection. A kernel can fuse the distance GEMM with a per-tile top-k, and "
        "ranks with small or empty shards finish early and wait only for the merge."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Exact integer distances and ids with a stated tie order: compared bit for bit.
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"rows": 300, "dim": 8, "queries": 6, "k": 5}),
        Case(
            "dev-bf16-empty",
            "bfloat16",
            {"rows": 200, "dim": 4, "queries": 5, "k": 12, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case("demo-1m-d128-q64", "float32", {"rows": 1 << 20, "dim": 128, "queries": 64, "k": 10}),
        Case(
            "demo-1m-d128-q64-empty",
            "bfloat16",
            {"rows": 1 << 20, "dim": 128, "queries": 64, "k": 16, "empty_rank": 1},
        ),
    ),
)
