from __future__ import annotations

import torch
import torch.distributed as dist

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
            incoming, requests = _pass_along(kv)
        block_out, block_lse = _attend(queries, kv[0].transpose(0, 1), kv[1].transpose(0, 1))
        out, lse = _merge(out, lse, block_out, block_lse)
        if step < world_size - 1:
            for request in requests:
                request.wait()
            kv = incoming
    return out.transpose(0, 1).contiguous().to(q.dtype), lse


def _pass_along(kv: torch.Tensor):
    """Send kv to the next rank and receive the previous rank's into a new buffer."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(kv)
    ops = [
        dist.P2POp(dist.isend, kv, (rank + 1) % world_size),
        dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size),
    ]
    return incoming, dist.batch_isend_irecv(ops)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Attention of [heads, s, D] queries on one key block: (out, lse), both float32."""
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
        # Flash attention, the kernel production ring attention calls per block: it
        # returns the log-sum-exp that merging needs.
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q[None], k[None], v[None])[:2]
        return out[0].float(), lse[0]
    scores = (q.float() @ k.float().transpose(1, 2)) * q.shape[-1] ** -0.5
    lse = scores.logsumexp(-1)
    return torch.exp(scores - lse[..., None]) @ v.float(), lse


def _merge(out, lse, block_out, block_lse):
    """Online softmax: combine two partial attentions by their log-sum-exps."""
    if out is None:
        return block_out, block_lse
    new_lse = torch.logaddexp(lse, block_lse)
    kept, added = (lse - new_lse).exp(), (block_lse - new_lse).exp()
    return out * kept[..., None] + block_out * added[..., None], new_lse


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
