from __future__ import annotations

import torch
import torch.distributed as dist

from problems.context._ring import attend, merge, pass_along
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    queries = q.transpose(0, 1)  # [heads, T/W, D]
    kv = torch.stack([k, v])  # travels as one buffer, in the input dtype
    out = lse = None
    for step in range(world_size):
        if step < world_size - 1:
            incoming, requests = pass_along(kv)
        source = (rank - step) % world_size  # whose tokens kv holds now
        # Keys of later ranks are all in this rank's future: masked out entirely. Only
        # the rank's own block needs the causal triangle.
        if source <= rank:
            block = attend(
                queries, kv[0].transpose(0, 1), kv[1].transpose(0, 1), causal=source == rank
            )
            out, lse = merge(out, lse, *block)
        if step < world_size - 1:
            for request in requests:
                request.wait()
            kv = incoming
    return out.transpose(0, 1).contiguous().to(q.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    shape = (p["t"] // ctx.world_size, p["heads"], p["d"])
    return {"q": ctx.randn(*shape), "k": ctx.randn(*shape), "v": ctx.randn(*shape)}


def bytes_moved(case: Case, world_size: int) -> int:
    # The busiest rank counts. In a ring, rank 0's k and v are needed by all W-1 later
    # ranks: 2·(W-1)·(T/W)·heads·D. Resharding heads instead (Ulysses) sends (W-1)/W of
    # q, k, v out and of out back from every rank: 4·(W-1)·(T/W)·(heads/W)·D. The cheaper
    # one is the floor.
    p = case.params
    tokens, heads, dim, size = p["t"] // world_size, p["heads"], p["d"], case.itemsize
    ring = 2 * (world_size - 1) * tokens * heads * dim * size
    resharding = 4 * (world_size - 1) * tokens * heads * dim * size // world_size
    return min(ring, resharding)


PROBLEM = Problem(
    slug="cp-ring-attention-causal",
    title="Ring attention (causal, contiguous chunks)",
    category=Category.CONTEXT,
    description=(
        "The forward pass of causal ring attention for a decoder, the sequence split into "
        "contiguous chunks. Every rank holds `q`, `k` and `v`, each `[T/W, heads, D]`, "
        "for tokens `[r*T/W, (r+1)*T/W)`. Rank r returns `[T/W, heads, D]` in the input "
        "dtype: causal softmax attention (token i attends to tokens 0..i of the whole "
        "sequence), scale 1/sqrt(D), for its own tokens and all heads.\n\n"
        "The reference passes k and v around the ring, W-1 steps of "
        "`torch.distributed.batch_isend_irecv` to the next rank, each transfer posted "
        "before the current block's attention runs. A block from an earlier rank is "
        "attended in full, the rank's own block with the causal triangle, and blocks "
        "from later ranks are skipped; partial results are combined by online softmax "
        "in float32 using each block's log-sum-exp (flash attention on GPU).\n\n"
        "Contiguous chunks are load-imbalanced: rank r has r full blocks and one "
        "triangle to compute, so rank W-1 does about 2W-1 times the work of rank 0 and "
        "nearly twice the average, and the ring runs at its pace; rank 0's k and v "
        "travel to every rank, while the last rank's are needed by nobody else. The "
        "output layout is fixed, so a kernel that balances the work must move queries "
        "or partial outputs to idle ranks (as zigzag/striped sharding does by design), "
        "skip transfers nobody needs, and overlap the rest with compute, reading peers' "
        "k and v in place over symmetric memory."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances={
        # Softmax and sums over up to T keys in float32, in another order.
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        # bf16 outputs: flash attention's probability rounding is averaged away, so the
        # error is about one output ulp (2^-8 relative), far below the effect of a
        # missing or misplaced key block.
        "bfloat16": Tolerance(atol=2e-3, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"t": 32, "heads": 4, "d": 16}),
        Case("dev-bf16", "bfloat16", {"t": 64, "heads": 4, "d": 32}),
    ),
    eval_cases=(
        Case("demo-8k-16h", "bfloat16", {"t": 8192, "heads": 16, "d": 128}),
        Case("demo-16k-16h", "bfloat16", {"t": 16384, "heads": 16, "d": 128}),
    ),
)
