from __future__ import annotations

import torch
import torch.distributed as dist

from problems.other._shards import LOW, all_sizes, bits_to_float, ordered_bits, shard_size
from problems.spec import EXACT, Case, Category, InputContext, Problem

# Regular samples per rank for choosing the splitters: enough to keep the buckets within a
# few percent of each other; the rebalancing step makes the output exact whatever they are.
SAMPLES = 256
_NO_SAMPLE = torch.iinfo(torch.int64).max


def _overlap(start: int, stop: int, lo: int, hi: int) -> int:
    return max(0, min(stop, hi) - max(start, lo))


def _splitters(packed: torch.Tensor, world_size: int) -> torch.Tensor:
    """W-1 keys that cut the gathered samples of every rank into W equal parts."""
    samples = packed.new_full((SAMPLES,), _NO_SAMPLE)
    if len(packed):
        # Evenly spaced positions: the inputs are in no particular order.
        samples = packed[torch.arange(SAMPLES, device=packed.device) * len(packed) // SAMPLES]
    gathered = packed.new_empty(world_size * SAMPLES)
    dist.all_gather_into_tensor(gathered, samples)
    valid = gathered.sort().values
    valid = valid[: int((valid != _NO_SAMPLE).sum().item())]  # an empty rank samples nothing
    if not len(valid):
        return packed.new_full((world_size - 1,), _NO_SAMPLE)
    return valid[torch.arange(1, world_size, device=packed.device) * len(valid) // world_size]


def _exchange(data: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
    out = data.new_empty(sum(recv))
    dist.all_to_all_single(out, data, recv, send)
    return out


def solution(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sizes = all_sizes(len(keys), keys.device)
    total, offset = sum(sizes), sum(sizes[:rank])
    # One int64 per key orders by value, then by global id: all distinct, so the buckets
    # and every sort below have a unique answer.
    ids = torch.arange(offset, offset + len(keys), device=keys.device)
    packed = ordered_bits(keys) * LOW + ids

    # Range partition: bucket q takes the keys in [splitter q-1, splitter q). Grouping by
    # bucket sorts one byte per key; the full sort waits until the buckets have arrived.
    dest = torch.searchsorted(_splitters(packed, world_size), packed, right=True)
    dest, order = dest.to(torch.uint8).sort()
    grouped = packed[order]
    # Bucket sizes from the sorted destinations (a histogram of W bins would serialise on
    # its atomics).
    ranks = torch.arange(world_size + 1, device=keys.device, dtype=torch.uint8)
    send_counts = torch.searchsorted(dest, ranks).diff()
    recv = torch.empty_like(send_counts)
    dist.all_to_all_single(recv, send_counts)
    bucket = _exchange(grouped, send_counts.tolist(), recv.tolist()).sort().values

    # Rebalance: bucket r holds global positions [starts[r], starts[r] + counts[r]); rank q
    # must end with positions [q·N/W, (q+1)·N/W). Everyone knows every count, so both
    # sides of the second all-to-all work out their split sizes without asking.
    counts = all_sizes(len(bucket), keys.device)
    starts = [sum(counts[:q]) for q in range(world_size)]
    bounds = [q * total // world_size for q in range(world_size + 1)]
    mine = (starts[rank], starts[rank] + counts[rank])
    send = [_overlap(*mine, bounds[q], bounds[q + 1]) for q in range(world_size)]
    recv = [
        _overlap(starts[q], starts[q] + counts[q], bounds[rank], bounds[rank + 1])
        for q in range(world_size)
    ]
    # Buckets are ordered by rank, so the received runs concatenate in sorted order.
    out = _exchange(bucket, send, recv)
    return bits_to_float(out >> 32).to(keys.dtype), out & (LOW - 1)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    n = shard_size(case, ctx)
    distinct = case.params.get("distinct", 0)
    if distinct:
        # Few distinct values: long runs of equal keys, ordered only by their global ids.
        return {"keys": ctx.randint(0, distinct, n).to(ctx.dtype)}
    return {"keys": ctx.randn(n)}


def bytes_moved(case: Case, world_size: int) -> int:
    # A key ends on a given rank with probability 1/W, so (W-1)/W of a rank's n keys (the
    # mean of its ragged size) must leave it, each with its key and an id (4 bytes: the
    # receiver knows the sender's offset).
    n = case.params["n"]
    return (world_size - 1) * n * (case.itemsize + 4) // world_size


PROBLEM = Problem(
    slug="other-sample-sort",
    title="Distributed sample sort with global ids",
    category=Category.OTHER,
    description=(
        "A distributed sort of keys spread unevenly over W ranks, as in the range-"
        "partitioned sorts of Spark's `sortByKey`, Dask-cuDF's `sort_values` and HPC sample "
        "sorts (PSRS, HykSort). Rank r holds `keys` `[n_r]` (float32 or bf16, finite; "
        "`n_r` differs by rank and trial and is 0 on some rank in some cases; bf16 and the "
        "few-distinct-values cases hold long runs of equal keys). A key's global id is its "
        "index plus the sizes of the ranks before it: `id = n_0 + … + n_{r−1} + i`. Sort "
        "all `N = Σ n_r` keys ascending, equal keys by ascending global id (so the order is "
        "unique; -0.0 counts as +0.0). Rank r returns positions `[r·N//W, (r+1)·N//W)` of "
        "that order as `(keys [c_r] in the input dtype, ids [c_r] int64)`, "
        "`c_r = (r+1)·N//W − r·N//W`: every rank returns its equal share, empty shard or "
        "not. Both outputs are compared exactly. N < 2^32.\n\n"
        "The reference all-gathers the sizes, packs each key and its id into one int64 "
        "(the key's order-preserving bits above the id), all-gathers 256 evenly spaced "
        "samples per rank and picks W−1 splitters from them, finds each key's bucket by "
        "binary search, groups the keys by bucket (a sort of one byte per key), exchanges "
        "the buckets with a ragged `all_to_all_single` (after an all-to-all of the "
        "counts), sorts the received bucket, all-gathers the bucket sizes and rebalances "
        "with a second ragged all-to-all to the exact equal split. About (W−1)/W of the "
        "keys must cross the links once; the reference moves them twice at 8 bytes each "
        "and waits on the host between the steps. A kernel can compute each key's final "
        "owner from a global histogram of key prefixes, write keys straight into the "
        "owner's output over symmetric memory and merge the W sorted runs it receives "
        "instead of sorting them again."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000}),
        Case("dev-bf16", "bfloat16", {"n": 3000}),
        Case("dev-dups-empty", "float32", {"n": 700, "distinct": 5, "empty_rank": 1}),
        Case("dev-tiny", "float32", {"n": 2, "empty_rank": 0}),
    ),
    eval_cases=(
        Case("demo-8m-empty", "float32", {"n": 1 << 23, "empty_rank": 1}),
        Case("demo-8m-bf16", "bfloat16", {"n": 1 << 23}),
    ),
)
