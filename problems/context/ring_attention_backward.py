from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _block_grads(q, k, v, dout, lse, delta):
    """Float32 gradients of one query block against one key/value block: (dq, dk, dv)."""
    scale = 1 / math.sqrt(q.shape[-1])
    q, k, v = q.float(), k.float(), v.float()
    probs = (torch.einsum("qhd,khd->hqk", q, k) * scale - lse[..., None]).exp()
    dv = torch.einsum("hqk,qhd->khd", probs, dout)
    dprobs = torch.einsum("qhd,khd->hqk", dout, v)
    dscores = probs * (dprobs - delta[..., None]) * scale
    dq = torch.einsum("hqk,khd->qhd", dscores, k)
    dk = torch.einsum("hqk,qhd->khd", dscores, q)
    return dq, dk, dv


def _shift(tensor: torch.Tensor) -> torch.Tensor:
    """Send `tensor` to rank r+1 and return what rank r-1 sent."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(tensor)
    ops = [
        dist.P2POp(dist.isend, tensor, (rank + 1) % world_size),
        dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size),
    ]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return incoming


def solution(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    dout: torch.Tensor,
    lse: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    dout = dout.float()
    # rowsum(dO ∘ O) equals rowsum(P ∘ dP) over the whole key range: computed once, here.
    delta = (dout * out.float()).sum(-1).T  # [heads, n]
    kv = torch.stack([k, v])
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    # The float32 gradient of the key/value block this rank holds travels with the block.
    dkv = torch.zeros(kv.shape, dtype=torch.float32, device=kv.device)
    for step in range(world_size):
        block_dq, block_dk, block_dv = _block_grads(q, kv[0], kv[1], dout, lse, delta)
        dq += block_dq
        dkv += torch.stack([block_dk, block_dv])
        if step < world_size - 1:
            kv = _shift(kv)
        # After the last step the accumulator belongs to rank r+1: one more hop home.
        dkv = _shift(dkv)
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # A real forward's output and log-sum-exp: every rank draws the whole sequence's q, k
    # and v (shared) and keeps its slice, so it can compute its rows' forward locally.
    seq, heads, dim = case.params["seq"], case.params["heads"], case.params["dim"]
    rows = seq // ctx.world_size
    mine = slice(ctx.rank * rows, (ctx.rank + 1) * rows)
    q, k, v = (ctx.randn(seq, heads, dim, shared=True) for _ in range(3))
    scores = torch.einsum("qhd,khd->hqk", q[mine].float(), k.float()) / math.sqrt(dim)
    lse = scores.logsumexp(-1)
    out = torch.einsum("hqk,khd->qhd", (scores - lse[..., None]).exp(), v.float())
    return {
        "q": q[mine].clone(),
        "k": k[mine].clone(),
        "v": v[mine].clone(),
        "out": out.to(ctx.dtype),
        "dout": ctx.randn(rows, heads, dim),
        "lse": lse,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Every query meets every key, so each rank's k and v ((T/W)·heads·dim each) must reach
    # W-1 peers, or the peers' queries and output gradients must reach it; either way two
    # [T/W, heads, dim] tensors per peer. (The dk/dv partial sums the reference sends back,
    # in float32, are extra traffic a fused kernel can avoid by reducing in place.)
    p = case.params
    return (world_size - 1) * 2 * (p["seq"] // world_size) * p["heads"] * p["dim"] * case.itemsize


PROBLEM = Problem(
    slug="cp-ring-attention-backward",
    title="Ring attention backward (non-causal)",
    category=Category.CONTEXT,
    description=(
        "The backward pass of non-causal softmax attention over a sequence of `T` tokens "
        "split contiguously across W ranks. Each rank holds, for its `T/W` tokens, `q`, `k`, "
        "`v`, the forward output `out` and its gradient `dout` (`[T/W, heads, dim]`, input "
        "dtype) and the forward's log-sum-exp `lse` (`[heads, T/W]`, float32, natural log, "
        "scores scaled by `1/√dim`). It returns `(dq, dk, dv)` for its own tokens in the "
        "input dtype, where `dk` and `dv` sum the contributions of every rank's queries:\n\n"
        "`P = exp(q·kᵀ/√dim − lse)`, `dv = Pᵀ·dout`, `dP = dout·vᵀ`, "
        "`dS = P ∘ (dP − rowsum(dout ∘ out))`, `dq = dS·k/√dim`, `dk = dSᵀ·q/√dim`.\n\n"
        "The reference rotates each key/value block around the ring W-1 times "
        "(`batch_isend_irecv` to rank r+1) together with a float32 accumulator of that "
        "block's `dk` and `dv`; each rank adds its queries' contribution, and a last hop "
        "returns every accumulator to its owner. Every rank's keys and values must meet "
        "every other rank's queries, so each rank sends at least two `[T/W, heads, dim]` "
        "tensors to each of its W-1 peers; a kernel can read peers' blocks from symmetric "
        "memory and reduce `dk`/`dv` partials in place instead of shipping float32 "
        "accumulators around the ring."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Float32 math against float64 differs by ~1e-6. In bf16 the outputs' rounding is 2^-9
    # relative and flash-style kernels that round P and dS to bf16 add a few times that;
    # gradients are O(0.01-1), so the absolute floor stays below a missing block's effect.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-3, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 64, "heads": 2, "dim": 16}),
        Case("dev-bf16", "bfloat16", {"seq": 128, "heads": 2, "dim": 32}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"seq": 4096, "heads": 16, "dim": 64}),
        Case("demo-8k", "bfloat16", {"seq": 8192, "heads": 8, "dim": 64}),
    ),
)
