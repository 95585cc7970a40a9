from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance

CHUNK = 64


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dtype = v.dtype
    q, k, v = q.float(), k.float(), v.float()
    # This chunk's state: the sum of its keys' outer products with their values.
    state = torch.einsum("thk,thv->hkv", k, v).contiguous()
    states = state.new_empty(world_size * state.shape[0], *state.shape[1:])
    dist.all_gather_into_tensor(states, state)
    # The exclusive prefix sum over ranks: everything before this chunk.
    incoming = states.view(world_size, *state.shape)[:rank].sum(0)
    # Chunks of 64 tokens: causal attention inside a chunk, and the running state of the
    # chunks before it (plus the incoming state) for everything earlier.
    n, heads = q.shape[0], q.shape[1]
    size = min(CHUNK, n)
    qc, kc, vc = (t.reshape(n // size, size, heads, -1).permute(2, 0, 1, 3) for t in (q, k, v))
    chunk_states = kc.transpose(-1, -2) @ vc  # [heads, chunks, dk, dv]
    before = chunk_states.cumsum(1) - chunk_states + incoming[:, None]
    inside = (qc @ kc.transpose(-1, -2)).tril() @ vc  # diagonal included
    out = (inside + qc @ before).permute(1, 2, 0, 3).reshape(n, heads, -1)
    return out.to(dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows = case.params["seq"] // ctx.world_size
    heads, dk, dv = case.params["heads"], case.params["dk"], case.params["dv"]
    # Unit-norm queries and keys, as linear-attention layers normalise them: outputs grow
    # like sqrt(position / dk) instead of sqrt(position · dk).
    q = F.normalize(ctx.randn(rows, heads, dk, dtype=torch.float32), dim=-1)
    k = F.normalize(ctx.randn(rows, heads, dk, dtype=torch.float32), dim=-1)
    return {"q": q.to(ctx.dtype), "k": k.to(ctx.dtype), "v": ctx.randn(rows, heads, dv)}


def bytes_moved(case: Case, world_size: int) -> int:
    # Rank r needs the sum of the states before it. A chained prefix sum (add your state
    # to the running sum you received, pass it on) sends one heads·dk·dv float32 state
    # per rank.
    p = case.params
    return p["heads"] * p["dk"] * p["dv"] * 4


PROBLEM = Problem(
    slug="cp-linear-attention-state",
    title="Causal linear attention, state passing",
    category=Category.CONTEXT,
    description=(
        "Causal linear attention (no softmax, identity feature map) over a sequence of "
        "`T` tokens split contiguously across W ranks: "
        "`out_t = Σ_{s ≤ t} (q_t · k_s) v_s`, per head. Rank r holds `q`, `k` "
        "`[T/W, heads, dk]` and `v` `[T/W, heads, dv]` for its tokens and returns `out` "
        "`[T/W, heads, dv]` in the input dtype.\n\n"
        "Everything before the chunk enters through one matrix per head: the state "
        "`S = Σ kᵀv` `[dk, dv]` of all earlier tokens. Each rank computes its chunk's state "
        "`S_r = K_rᵀ V_r` in float32; the reference all-gathers the states "
        "(`all_gather_into_tensor`) and sums those of ranks before it (an exclusive prefix "
        "sum), then works through the chunk in blocks of 64 tokens: causal attention inside a "
        "block plus the block's queries times the state of everything before it. Only the "
        "running sum has to travel: each rank needs to send one `heads·dk·dv` float32 "
        "state, so the exchange is small and latency-bound, and a kernel can hide it behind "
        "the intra-chunk work, which needs nothing from the peers."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Outputs are sums of up to T terms and reach ~sqrt(T/dk) (about 10 at the demo sizes).
    # Float32 sums differ from float64 by ~1e-6 relative to that; the bf16 output's
    # rounding is 2^-9 relative, and kernels doing the chunk matmuls in bf16 add a little
    # more. A missing or doubled incoming state is off by O(1) or more.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=5e-2, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 256, "heads": 2, "dk": 8, "dv": 8}),
        Case("dev-bf16", "bfloat16", {"seq": 256, "heads": 2, "dk": 16, "dv": 16}),
    ),
    eval_cases=(
        Case("demo-8k", "bfloat16", {"seq": 8192, "heads": 16, "dk": 128, "dv": 128}),
        Case("demo-16k", "bfloat16", {"seq": 16384, "heads": 16, "dk": 64, "dv": 128}),
    ),
)
