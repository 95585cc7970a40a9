from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _partner(rank: int, world_size: int) -> int:
    """The rank of the other expert-data-parallel replica holding the same experts."""
    return (rank + world_size // 2) % world_size


def solution(
    x: torch.Tensor, grad_y: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sizes = tokens_per_expert.tolist()
    grad_x, partial = [], []
    for expert, (rows, grads) in enumerate(zip(x.split(sizes), grad_y.split(sizes), strict=True)):
        grad_x.append(grads @ weight[expert].T)
        # float32 products of dtype values are exact and accumulate in float32 with no
        # rounding to the dtype, as a GEMM writing into a float32 main_grad; an expert with
        # no rows contributes zeros ([H, 0] @ [0, F]).
        partial.append(rows.float().T @ grads.float())
    mine = torch.stack(partial)
    # Expert-data-parallel reduction: a sum over the pair of replicas. Each side adds the
    # same two numbers (a + b == b + a in IEEE), so both get identical gradients.
    theirs = torch.empty_like(mine)
    peer = _partner(rank, world_size)
    ops = [dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, theirs, peer)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return torch.cat(grad_x), mine + theirs


def _tokens_per_expert(case: Case, ctx: InputContext, local: int) -> torch.Tensor:
    """[L] int64: `rows` draws over the local experts, the last `cold` never drawn, local
    expert 0 taking `skew` percent of them on top of its share; none on the empty rank."""
    p = case.params
    rows = 0 if p.get("empty_rank", -1) == ctx.rank else p["rows"]
    live, hot = local - p.get("cold", 0), p.get("skew", 0) / 100
    probs = torch.zeros(local, dtype=torch.float32, device=ctx.device)
    probs[:live] = (1 - hot) / live
    probs[0] += hot
    if rows == 0:
        return torch.zeros(local, dtype=torch.int64, device=ctx.device)
    picks = torch.multinomial(probs, rows, replacement=True, generator=ctx.gen())
    return torch.bincount(picks, minlength=local)


def _replica_weights(case: Case, ctx: InputContext, local: int) -> torch.Tensor:
    """[L, H, F]: this rank's slice of E expert weights drawn one by one from the shared
    stream (every rank draws all E, so both replicas of an expert get the same numbers)."""
    hidden, ffn = case.params["hidden"], case.params["ffn"]
    first = (ctx.rank % (ctx.world_size // 2)) * local
    kept = []
    for expert in range(case.params["experts"]):
        drawn = ctx.randn(hidden, ffn, shared=True, dtype=torch.float32)
        if first <= expert < first + local:
            kept.append((drawn * hidden**-0.5).to(ctx.dtype))
    return torch.stack(kept)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    local = 2 * case.params["experts"] // ctx.world_size
    counts = _tokens_per_expert(case, ctx, local)
    rows = int(counts.sum())
    return {
        "x": ctx.randn(rows, case.params["hidden"]),
        "grad_y": ctx.randn(rows, case.params["ffn"]),
        "weight": _replica_weights(case, ctx, local),
        "tokens_per_expert": counts,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank must trade its float32 partial weight gradients with its replica partner:
    # a sum over two ranks moves the whole [L, H, F] once per rank (half in a
    # reduce-scatter and half in an all-gather, or all of it one way each).
    p = case.params
    local = 2 * p["experts"] // world_size
    return local * p["hidden"] * p["ffn"] * 4


PROBLEM = Problem(
    slug="ep-grouped-gemm-backward",
    title="Grouped expert GEMM backward with the expert-data-parallel gradient sum",
    category=Category.EXPERT,
    description=(
        "The backward pass of one expert linear layer `y = x @ W_e` run as a grouped GEMM "
        "over ragged per-expert token blocks (Megatron-LM's GroupedMLP / TEGroupedLinear), "
        "with expert parallelism inside two expert-data-parallel replicas, as Megatron-LM "
        "lays out its expert and expert-data-parallel groups. The W ranks form 2 replicas "
        "of `G = W/2` consecutive ranks each; within a replica the `E` experts are split "
        "`L = E/G = 2E/W` per rank: rank r holds global experts `(r mod G)·L + l`, "
        "`l < L`, so rank r and rank `(r + G) mod W` hold the same experts (at W = 2 both "
        "ranks hold all of them). Rank r holds `tokens_per_expert` `[L]` int64 (the rows "
        "it received per local expert: ragged, some 0, all 0 on some rank in a case), "
        "`x` `[N_r, H]` and `grad_y` `[N_r, F]` with `N_r = Σ tokens_per_expert`, rows "
        "expert-major (local expert 0's block first), and `weight` `[L, H, F]` (the case's "
        "dtype; equal on both replicas).\n\n"
        "Rank r returns `(grad_x, grad_weight)`. `grad_x` `[N_r, H]` in the dtype: row n "
        "of expert l's block is `grad_y[n] @ weight[l]ᵀ`, accumulated in float32 and "
        "rounded to the dtype once. `grad_weight` `[L, H, F]` float32: for each local "
        "expert, `x_lᵀ @ grad_y_l` over its block, accumulated in float32 and kept in "
        "float32 (a wgrad GEMM writing a float32 main_grad, never rounded to the dtype; "
        "zeros for an empty block), plus the same partial of the partner rank "
        "`(r + G) mod W`, the two added in float32 (identical on both ranks).\n\n"
        "The reference loops over the local experts with two GEMMs each (the weight "
        "gradient as a float32 GEMM of the upcast blocks), then trades the stacked float32 "
        "`[L, H, F]` partials with the partner (`batch_isend_irecv`) and adds. Only the "
        "partial weight gradients cross the links, in float32. A kernel can "
        "stream each expert's dW tiles to the partner's symmetric buffer as the grouped "
        "GEMM finishes them, hiding the exchange behind the remaining experts' GEMMs and "
        "the dX GEMMs, and skip empty experts without launching anything."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # grad_x: one GEMM rounded once (scale ~sqrt(F/H)): another float32 accumulation order
    # flips the bf16 rounding by one ulp, 2^-8 relative. grad_weight stays in float32: its
    # partials (scale ~sqrt(rows per expert), up to ~100) differ by ~1e-6 relative between
    # summation orders, so even where the two replicas' partials cancel the error is far
    # below 1e-4 absolute. (Rounding the partials to bf16 would be off by up to half an ulp
    # of the partial, 0.25 at 64, wherever they cancel: that is why the spec keeps them in
    # float32.) A missing replica or a row in the wrong expert's block moves elements by
    # O(1) or by a factor ~sqrt(2).
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"rows": 40, "hidden": 16, "ffn": 24, "experts": 8}),
        Case(
            "dev-bf16",
            "bfloat16",
            {"rows": 64, "hidden": 32, "ffn": 48, "experts": 8, "cold": 1},
        ),
        Case(
            "dev-skew",
            "bfloat16",
            {"rows": 48, "hidden": 16, "ffn": 32, "experts": 16, "skew": 70, "cold": 1},
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {"rows": 32, "hidden": 16, "ffn": 16, "experts": 8, "cold": 1, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-balanced",
            "bfloat16",
            {"rows": 8192, "hidden": 2048, "ffn": 1408, "experts": 16},
        ),
        Case(
            "demo-skew-empty",
            "bfloat16",
            {
                "rows": 4096,
                "hidden": 4096,
                "ffn": 1408,
                "experts": 16,
                "skew": 60,
                "cold": 1,
                "empty_rank": 1,
            },
        ),
    ),
)
