from __future__ import annotations

import torch
import torch.distributed as dist

from problems.context._ring import attend, merge, pass_along
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    queries = q.transpose(0, 1)  # [heads, T/W, D]
    kv = torch.stack([k, v])  # travels as one buffer, in the input dtype
    out = lse = None
    for step in range(world_size):
        # The next block is in flight while this one is used.
        if step < world_size - 1:
            incoming, requests = pass_along(kv)
        block_out, block_lse = attend(queries, kv[0].transpose(0, 1), kv[1].transpose(0, 1))
        out, lse = merge(out, lse, block_out, block_lse)
        if step < world_size - 1:
            for request in requests:
                request.wait()
            kv = incoming
    return out.transpose(0, 1).contiguous().to(q.dtype), lse


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    shape = (p["t"] // ctx.world_size, p["heads"], p["d"])
    return {"q": ctx.randn(*shape), "k": ctx.randn(*shape), "v": ctx.randn(*shape)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Two ways to bring every query together with every key, the cheaper one counts:
    #   ring: each rank's k and v must reach the W-1 others: 2·(W-1)·(T/W)·heads·D;
    #   head resharding (Ulysses): (W-1)/W of q, k, v out and of out back, plus lse back:
    #   (W-1)·(T/W)·(heads/W)·(4·D elements + one float32).
    p = case.params
    tokens, heads, dim, size = p["t"] // world_size, p["heads"], p["d"], case.itemsize
    ring = 2 * (world_size - 1) * tokens * heads * dim * size
    resharding = (world_size - 1) * tokens * heads * (4 * dim * size + 4) // world_size
    return min(ring, resharding)


PROBLEM = Problem(
    slug="cp-ring-attention",
    title="Ring attention (non-causal), with log-sum-exp",
    category=Category.CONTEXT,
    description=(
        "The forward pass of ring attention over a sequence split across ranks, without a "
        "mask (encoders, cross-attention over a sharded memory). Every rank holds `q`, "
        "`k` and `v`, each `[T/W, heads, D]`, for its sequence block (tokens "
        "`[r*T/W, (r+1)*T/W)`). Rank r returns `(out, lse)`: `out` `[T/W, heads, D]` in "
        "the input dtype is softmax attention of its queries over all T keys, scale "
        "1/sqrt(D); `lse` `[heads, T/W]` in float32 is the natural-log log-sum-exp of "
        "each query's scaled scores over all T keys (what the backward pass needs).\n\n"
        "The reference passes k and v around the ring, W-1 steps of "
        "`torch.distributed.batch_isend_irecv` to the next rank, each step's transfer "
        "posted before the current block's attention runs. Each block's attention comes "
        "from flash attention on GPU (with its log-sum-exp), and blocks are combined by "
        "online softmax in float32: `lse' = logaddexp(lse, lse_b)`, "
        "`out' = out·exp(lse - lse') + out_b·exp(lse_b - lse')`. Every rank's k and v "
        "must visit every other rank, 2·(W-1)/W of the sequence's k and v per rank; at "
        "W > 2 resharding heads instead (Ulysses) moves less, so the roofline uses that. "
        "A faster kernel fuses transfer and compute: read the peers' k and v blocks in "
        "place over symmetric memory as the kernel's tiles need them and keep the "
        "running max and sum in registers rather than merging whole blocks."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances={
        # Softmax and sums over T keys in float32, in another order.
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        # bf16 outputs: flash attention's probability rounding is averaged away, so the
        # error is about one output ulp (2^-8 relative); lse is float32 throughout. A
        # missing key block moves out by more than atol and lse by log(W/(W-1)).
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
