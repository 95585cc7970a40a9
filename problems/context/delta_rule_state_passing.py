from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance

CHUNK = 64


def _delta_rule(q, k, values, beta, state):
    """The delta rule over one rank's tokens from `state` [h, m, dk], in chunks.

    Within a chunk of L tokens the updates u_t = beta_t (v_t - S_{t-1} k_t) solve a unit
    lower-triangular system (the "WY" form): u = base - weights·S_startᵀ, where `base`
    and `weights` depend on the chunk alone and are solved for all chunks at once. Only
    the L-token hop of the state stays sequential. Returns outputs [h, n, m] and the
    final state.
    """
    heads, n, dk = k.shape
    size = min(CHUNK, n)
    qc, kc, vc = (t.reshape(heads, n // size, size, -1) for t in (q, k, values))
    bc = beta.reshape(heads, n // size, size, 1)
    eye = torch.eye(size, dtype=kc.dtype, device=kc.device)
    system = eye + (bc * kc @ kc.transpose(-1, -2)).tril(-1)
    rhs = torch.cat([bc * kc, bc * vc], dim=-1)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    weights, base = solved[..., :dk], solved[..., dk:]
    starts, updates = [], []
    for c in range(n // size):
        starts.append(state)
        updates.append(base[:, c] - weights[:, c] @ state.transpose(1, 2))
        state = state + updates[-1].transpose(1, 2) @ kc[:, c]
    starts_t, updates_t = torch.stack(starts, 1), torch.stack(updates, 1)
    outs = qc @ starts_t.transpose(-1, -2) + (qc @ kc.transpose(-1, -2)).tril() @ updates_t
    return outs.reshape(heads, n, -1), state


def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dtype = v.dtype
    q, k, v = (t.float().transpose(0, 1) for t in (q, k, v))  # [heads, n, dim]
    beta_f = beta.float().T
    heads, _, dk = k.shape
    dv = v.shape[2]
    # The state after this chunk is affine in the incoming one: S_out = S_in·P + B, and
    # each output is o_t = B_t q_t + S_in (P_t q_t). Running the recurrence on the stacked
    # state [B; P] from [0; I], with values [v; 0], yields B_t q_t and P_t q_t at once,
    # before anything has arrived from the previous rank.
    values = torch.cat([v, v.new_zeros(heads, v.shape[1], dk)], dim=-1)
    identity = torch.eye(dk, device=k.device).expand(heads, dk, dk)
    start = torch.cat([k.new_zeros(heads, dv, dk), identity], dim=1)
    outs, final = _delta_rule(q, k, values, beta_f, start)
    local_out, moved_q = outs[..., :dv], outs[..., dv:]
    local_state, transition = final[:, :dv], final[:, dv:]
    # Only the D×D map of each rank is sequential: receive the state, pass it on.
    incoming = k.new_zeros(heads, dv, dk)
    if rank > 0:
        dist.recv(incoming, src=rank - 1)
    if rank + 1 < world_size:
        dist.send((incoming @ transition + local_state).contiguous(), dst=rank + 1)
    out = local_out + moved_q @ incoming.transpose(1, 2)
    return out.transpose(0, 1).to(dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows = case.params["seq"] // ctx.world_size
    heads, dk, dv = case.params["heads"], case.params["dk"], case.params["dv"]
    # Unit-norm keys and betas in (0, 1) keep every step a contraction, as DeltaNet does.
    q = F.normalize(ctx.randn(rows, heads, dk, dtype=torch.float32), dim=-1)
    k = F.normalize(ctx.randn(rows, heads, dk, dtype=torch.float32), dim=-1)
    return {
        "q": q.to(ctx.dtype),
        "k": k.to(ctx.dtype),
        "v": ctx.randn(rows, heads, dv),
        "beta": ctx.randn(rows, heads, dtype=torch.float32).sigmoid().to(ctx.dtype),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank but the last sends one float32 state [heads, dv, dk] to the next rank.
    p = case.params
    return p["heads"] * p["dv"] * p["dk"] * 4


PROBLEM = Problem(
    slug="cp-delta-rule-state-passing",
    title="Delta-rule recurrence, state passing",
    category=Category.CONTEXT,
    description=(
        "The delta rule of DeltaNet-style layers over a sequence of `T` tokens split "
        "contiguously across W ranks. Per head, the state `S` `[dv, dk]` starts at zero "
        "and every token updates it and reads it: "
        "`S_t = S_{t−1} + β_t (v_t − S_{t−1} k_t) k_tᵀ`, `o_t = S_t q_t`. Rank r holds "
        "`q`, `k` `[T/W, heads, dk]`, `v` `[T/W, heads, dv]` and `beta` `[T/W, heads]` for "
        "its tokens and returns `o` `[T/W, heads, dv]` in the input dtype. Keys have unit "
        "norm and `beta` lies in (0, 1).\n\n"
        "The recurrence is linear in the incoming state: over a rank's chunk, "
        "`S_out = S_in·P + B` and `o_t = B_t q_t + S_in (P_t q_t)`, with `P` the product of "
        "the chunk's `I − β k kᵀ` factors. The reference computes `B_t q_t` and `P_t q_t` "
        "in float32 before any communication (chunks of 64 tokens in the WY form), then "
        "passes the state along the ranks: rank r receives `S_in` from rank r-1 "
        "(`recv`), sends `S_in·P + B` to rank r+1 (`send`) and adds `S_in (P_t q_t)` to "
        "its outputs. Each rank sends one `heads·dv·dk` float32 state; the chain of W-1 "
        "dependent hops is pure latency, which a kernel can cut by signalling through "
        "symmetric memory, or by gathering the W affine maps and composing them on every "
        "rank at once."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # The recurrence is a contraction, so rounding does not grow along the sequence:
    # float32 math differs from float64 by ~1e-6 on outputs of O(1). The bf16 output's
    # rounding is 2^-9 relative; kernels doing chunk matmuls in bf16 add a few times that.
    # A wrong incoming state is off by O(0.1-1).
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 256, "heads": 2, "dk": 8, "dv": 8}),
        Case("dev-bf16", "bfloat16", {"seq": 512, "heads": 2, "dk": 16, "dv": 16}),
    ),
    eval_cases=(
        Case("demo-4k", "bfloat16", {"seq": 4096, "heads": 16, "dk": 64, "dv": 64}),
        Case("demo-8k", "bfloat16", {"seq": 8192, "heads": 16, "dk": 128, "dv": 128}),
    ),
)
