from __future__ import annotations

import torch
import torch.distributed as dist

from problems.other._shards import LOW, all_sizes, bits_to_float, ordered_bits, shard_size
from problems.spec import EXACT, Case, Category, InputContext, Problem

# Pads a rank's candidates when it holds fewer than k values: below every real key.
_NO_CANDIDATE = torch.iinfo(torch.int64).min


def solution(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sizes = all_sizes(len(x), x.device)
    offset = sum(sizes[:rank])
    # The local top k is among the values at or above the local k-th largest value; ties
    # there are settled by packing value and LOWER global id (its complement sits in the
    # low bits) into distinct int64 keys.
    candidates = x.new_full((k,), _NO_CANDIDATE, dtype=torch.int64)
    local = min(k, len(x))
    if local:
        index = (x >= x.topk(local).values[-1]).nonzero()[:, 0]
        keys = ordered_bits(x[index]) * LOW + (LOW - 1 - offset - index)
        candidates[:local] = keys.topk(local).values
    # The global top k is among the union of every rank's top k.
    gathered = candidates.new_empty(world_size * k)
    dist.all_gather_into_tensor(gathered, candidates)
    best = gathered.topk(k).values  # sorted, descending
    return bits_to_float(best >> 32).to(x.dtype), LOW - 1 - (best & (LOW - 1))


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"x": ctx.randn(shard_size(case, ctx)), "k": case.params["k"]}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every rank must see every other rank's k best candidates: a value and an index
    # (4 bytes: global indices stay below 2**32) to each of W-1 peers.
    return (world_size - 1) * case.params["k"] * (case.itemsize + 4)


PROBLEM = Problem(
    slug="other-topk",
    title="Distributed top-k of a sharded vector",
    category=Category.OTHER,
    description=(
        "The global top k of a vector sharded unevenly over W ranks, as a sharded "
        "similarity search merges per-shard results (FAISS `IndexShards`, sharded "
        "retrieval in recommender serving) or a sampler takes the top k of a "
        "vocabulary-parallel row. Rank r holds `x` `[n_r]` (float32 or bf16, finite; "
        "`n_r` differs by rank and trial and is 0 on some rank in some cases) and the same "
        "int `k` (N = Σ n_r ≥ k, N < 2^32). Element i of rank r has global index "
        "`n_0 + … + n_{r−1} + i`. Every rank returns `(values [k], indices [k])`: the k "
        "largest values in `x`'s dtype in descending order, and their global indices "
        "(int64). Equal values (frequent in bf16, also at the k-th place) order by lower "
        "global index first, so the answer is unique; -0.0 counts as +0.0. Both outputs "
        "are compared exactly.\n\n"
        "The reference all-gathers the sizes, keeps the local values at or above the "
        "rank's k-th largest (a float top-k), packs each of them with the complement of "
        "its global index into one int64 key and takes the top k keys (padding short "
        "shards), all-gathers the `W·k` candidates and takes their top k. Only the k "
        "candidates per rank must cross the links, so the problem is about the local "
        "selection over `n_r` values and the latency of one small exchange: a kernel can "
        "select with a radix pass, push its candidates into every peer's symmetric buffer "
        "and merge them there with a single launch."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 2000, "k": 32}),
        Case("dev-bf16", "bfloat16", {"n": 5000, "k": 256}),
        Case("dev-empty", "bfloat16", {"n": 20, "k": 10, "empty_rank": 1}),
    ),
    eval_cases=(
        Case("demo-16m-fp32", "float32", {"n": 1 << 24, "k": 1024}),
        Case("demo-16m-bf16-empty", "bfloat16", {"n": 1 << 24, "k": 1024, "empty_rank": 1}),
    ),
)
