from __future__ import annotations

import torch
import torch.distributed as dist

from problems.other._shards import shard_size
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(x: torch.Tensor, lo: int, hi: int, bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # hi - lo and bins are powers of two, so (x - lo) * bins / (hi - lo) is exact in
    # float64 for float32 or bf16 x: its floor is the exact bin, edges included.
    scaled = (x.double() - lo) * (bins / (hi - lo))
    index = scaled.floor().clamp(0, bins - 1).long()  # outside [lo, hi): the edge bins
    local = torch.bincount(index, minlength=bins)
    table = local.new_empty(world_size * bins)
    dist.all_gather_into_tensor(table, local)
    table = table.view(world_size, bins)
    counts = table.sum(dim=0)
    # Where this rank's values of bin b start in the bin-ordered global sequence: after
    # every value of the bins before b, then after the values of b on ranks before r.
    offsets = counts.cumsum(dim=0) - counts + table[:rank].sum(dim=0)
    return counts, offsets


def make_inputs(case: Case, ctx: InputContext) -> dict:
    lo, hi = case.params["lo"], case.params["hi"]
    # Centred on the range with a fifth of its width as standard deviation: about 1.2% of
    # the values fall outside it and land in the edge bins. bf16 values sit on bin edges.
    values = ctx.randn(shard_size(case, ctx), dtype=torch.float32) * ((hi - lo) / 5)
    return {
        "x": (values + (hi + lo) / 2).to(ctx.dtype),
        "lo": lo,
        "hi": hi,
        "bins": case.params["bins"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Counts fit in 32 bits. Fewest: bin owners (B/W bins each) receive every rank's
    # counts of their bins, then send back to every rank the global counts and that
    # rank's offsets of their bins: 3(W-1)/W of B 4-byte counts per rank.
    return 3 * (world_size - 1) * case.params["bins"] * 4 // world_size


PROBLEM = Problem(
    slug="other-histogram",
    title="Distributed histogram with scatter offsets",
    category=Category.OTHER,
    description=(
        "A global histogram and each rank's write offsets: the counting pass of a "
        "distributed radix or bucket sort (cuDF hash and range partitioning), and of "
        "expert-parallel dispatch where each rank counts its tokens per expert and needs "
        "where to write them (Megatron-LM, DeepEP). Rank r holds `x` `[n_r]` (float32 or "
        "bf16, finite; `n_r` differs by rank and trial and is 0 on some rank in some "
        "cases) and the same ints `lo`, `hi`, `bins` (B), with `hi − lo` and B powers of "
        "two. A value's bin is `clamp(floor((x − lo)·B/(hi − lo)), 0, B−1)` computed "
        "exactly (in float64 it is exact; float32 is not): bins are `[lo + b·w, "
        "lo + (b+1)·w)` with `w = (hi − lo)/B`, values below `lo` count in bin 0 and "
        "values at or above `hi` in bin B−1. Every rank returns `(counts [B], offsets "
        "[B])`, both int64: `counts[b]`, the number of values of bin b over all ranks, and "
        "`offsets[b] = Σ_{b'<b} counts[b'] + Σ_{q<r} count_q[b]`, where rank r's first "
        "value of bin b goes in the bin-ordered sequence of all values (count_q: rank q's "
        "own histogram). Both are compared exactly.\n\n"
        "The reference bins in float64, counts with `bincount`, all-gathers every rank's "
        "`[B]` counts and sums and prefix-sums the `[W, B]` table. The pass over the "
        "values is bandwidth-bound and the exchange small: a kernel can bin in shared "
        "memory, write its counts into every peer's symmetric table (or its share of the "
        "bins to their owners) and scan there, without the all-gather's launch and "
        "synchronisation."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n": 1000, "lo": -4, "hi": 4, "bins": 64}),
        Case("dev-bf16", "bfloat16", {"n": 2000, "lo": -2, "hi": 6, "bins": 256}),
        Case("dev-empty", "float32", {"n": 500, "lo": 0, "hi": 1, "bins": 16, "empty_rank": 1}),
    ),
    eval_cases=(
        Case(
            "demo-16m-1k-bf16-empty",
            "bfloat16",
            {"n": 1 << 24, "lo": -4, "hi": 4, "bins": 1024, "empty_rank": 1},
        ),
        Case("demo-16m-64k", "float32", {"n": 1 << 24, "lo": -8, "hi": 8, "bins": 65536}),
    ),
)
