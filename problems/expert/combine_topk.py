from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._routing_a import (
    all_to_all_rows,
    draw_all_topk,
    exchange_counts,
    expected_peer_rows,
    gate_weights,
    regroup,
    sort_by_expert,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    expert_out: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
) -> torch.Tensor:
    world_size = dist.get_world_size()
    local = num_experts // world_size
    tokens, k = topk_ids.shape
    # The layout of the rows this rank holds comes from the other ranks' routing: one
    # exchange of the per-expert counts tells each expert rank its (expert, source) blocks.
    order, per_expert = sort_by_expert(topk_ids, num_experts)
    held = exchange_counts(per_expert)  # [W sources, L local experts]
    by_source = regroup(expert_out, held.T)  # expert-major -> source-major
    back = all_to_all_rows(
        by_source, held.sum(1).tolist(), per_expert.view(world_size, local).sum(1).tolist()
    )
    # `back` is in this rank's (expert, token) order: put each row in its (token, slot).
    slots = back.new_empty((tokens * k, back.shape[1]))
    slots[order] = back
    weighted = slots.float().view(tokens, k, back.shape[1]) * topk_weights.float()[:, :, None]
    return weighted.sum(dim=1).to(expert_out.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Every rank's routing comes from the shared stream so that each rank knows how many
    # rows it holds; a rank is handed only its own routing and must learn the rest.
    routing = draw_all_topk(case, ctx)
    experts, world_size = case.params["experts"], ctx.world_size
    local = experts // world_size
    held = sum(int((ids // local == ctx.rank).sum()) for ids in routing)
    mine = routing[ctx.rank]
    return {
        "expert_out": ctx.randn(held, case.params["hidden"]),
        "topk_ids": mine,
        "topk_weights": gate_weights(ctx, len(mine), case.params["topk"]),
        "num_experts": experts,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token, one row from each peer rank hosting one of its experts: that rank can sum
    # its own experts' weighted rows first (the weights, k floats a token, are noise).
    # Expected count under the case's routing distribution, averaged over the ranks.
    rows = expected_peer_rows(case, world_size)
    return max(1, int(rows * case.params["hidden"] * case.itemsize))


PROBLEM = Problem(
    slug="ep-combine",
    title="MoE token combine all-to-all (weighted top-k sum)",
    category=Category.EXPERT,
    description=(
        "The combine that follows the expert GEMMs of an expert-parallel MoE layer "
        "(Megatron-LM's all-to-all dispatcher, DeepSpeed-MoE, DeepEP's combine): every "
        "expert output row returns to the rank its token came from and is summed there "
        "with the router's weights. `E` experts (`num_experts`, a multiple of W), `L = E/W` "
        "per rank, expert e on rank `e // L` as local expert `e % L`. Rank r holds its "
        "tokens' routing, `topk_ids` `[T_r, k]` (int64, distinct experts per token) and "
        "`topk_weights` `[T_r, k]` (float32), and `expert_out` `[N_r, H]`: one row per "
        "(token, expert) pair of any rank routed to rank r's experts, in the order "
        "ep-dispatch returns them: by local expert, then source rank, then the token's "
        "index on its source rank. A rank is not given the other ranks' routing, so it "
        "does not know where its blocks of `expert_out` start until the ranks exchange "
        "what they need (e.g. each rank's per-expert token counts). `T_r` may be 0; some "
        "experts may have no tokens and `N_r` may be 0.\n\n"
        "Rank r returns `y` `[T_r, H]` in `expert_out`'s dtype: "
        "`y[t] = Σ_j topk_weights[t, j] · out(t, topk_ids[t, j])`, where `out(t, e)` is "
        "the row expert e's rank holds for token t of rank r, products and sum in "
        "float32, rounded to the dtype once.\n\n"
        "The reference exchanges the per-expert counts (`all_to_all_single`), regroups "
        "its rows source-major, sends them back with a variable-split "
        "`all_to_all_single`, restores (token, slot) order and reduces in float32. Only "
        "rows of other ranks' tokens must cross the links, and an expert rank can first "
        "sum the weighted rows of one token's experts it hosts. A symmetric-memory kernel "
        "can read or write the rows straight between the expert ranks' buffers and the "
        "token's accumulator, fusing the weighting and the sum into the transfer."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Sums of k <= 8 float32 products of O(1): other orders move them by ~1e-7. In bf16 the
    # one final rounding may then land on the neighbouring value: one ulp, <= 2^-7
    # relative. A missing or doubled term moves the result by its weight, ~1/k, far more.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-3, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 24, "hidden": 16, "experts": 16, "topk": 4}),
        Case("dev-bf16", "bfloat16", {"tokens": 32, "hidden": 64, "experts": 8, "topk": 2}),
        Case(
            "dev-skew",
            "bfloat16",
            {"tokens": 40, "hidden": 32, "experts": 16, "topk": 2, "skew": 90, "cold": 2},
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {"tokens": 16, "hidden": 16, "experts": 16, "topk": 3, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-balanced",
            "bfloat16",
            {"tokens": 4096, "hidden": 4096, "experts": 64, "topk": 8},
        ),
        Case(
            "demo-skew-empty",
            "bfloat16",
            {
                "tokens": 2048,
                "hidden": 7168,
                "experts": 256,
                "topk": 8,
                "skew": 80,
                "cold": 8,
                "empty_rank": 1,
            },
        ),
    ),
)
