from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._routing_a import (
    all_to_all_rows,
    draw_routing,
    exchange_counts,
    expected_peer_rows,
    rank_tokens,
    regroup,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    expert_out: torch.Tensor, routing_map: torch.Tensor, probs: torch.Tensor
) -> torch.Tensor:
    world_size = dist.get_world_size()
    tokens, experts = routing_map.shape
    by_expert = routing_map.T  # [E, T]: the permuted order is expert, then token
    per_expert = by_expert.sum(dim=1)
    # Which blocks of expert_out belong to which source rank depends on every rank's map:
    # exchange the per-expert counts.
    held = exchange_counts(per_expert)  # [W sources, L local experts]
    back = all_to_all_rows(
        regroup(expert_out, held.T),  # expert-major -> source-major
        held.sum(1).tolist(),
        per_expert.view(world_size, -1).sum(1).tolist(),
    )
    # Un-permute: row i of `back` is the i-th true entry of the map taken expert by expert.
    token_ids = torch.arange(tokens, device=routing_map.device).expand(experts, tokens)
    token_ids = token_ids.masked_select(by_expert)
    weighted = back.float() * probs.T.masked_select(by_expert)[:, None]
    out = torch.zeros(tokens, expert_out.shape[1], dtype=torch.float32, device=back.device)
    return out.index_add_(0, token_ids, weighted).to(expert_out.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Every rank's map comes from the shared stream so that each rank knows how many rows
    # it holds; a rank is handed only its own map and must learn the rest.
    maps = [
        draw_routing(case, ctx, rank_tokens(case, r), shared=True) for r in range(ctx.world_size)
    ]
    local = case.params["experts"] // ctx.world_size
    mine = slice(ctx.rank * local, (ctx.rank + 1) * local)
    held = sum(int(routing_map[:, mine].sum()) for routing_map, _ in maps)
    routing_map, probs = maps[ctx.rank]
    return {
        "expert_out": ctx.randn(held, case.params["hidden"]),
        "routing_map": routing_map,
        "probs": probs,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token, one row from each peer rank hosting one of its kept experts: that rank can
    # sum its own experts' weighted rows first, given the probabilities (noise beside the
    # rows). Expected count under the case's routing and drops, averaged over the ranks.
    rows = expected_peer_rows(case, world_size)
    return max(1, int(rows * case.params["hidden"] * case.itemsize))


PROBLEM = Problem(
    slug="ep-unpermute-combine",
    title="MoE all-to-all back, unpermute and probability-weighted sum (Megatron-style)",
    category=Category.EXPERT,
    description=(
        "The inverse of ep-permute-dispatch, as Megatron-LM's all-to-all MoE token "
        "dispatcher runs it after the expert GEMMs: the expert-major outputs go back to "
        "their source ranks, are un-permuted into token order and reduced with the router "
        "probabilities. `E` experts (a multiple of W), `L = E/W` per rank, expert e on rank "
        "`e // L` as local expert `e % L`. Rank r holds its own `routing_map` `[T_r, E]` "
        "(bool) and `probs` `[T_r, E]` (float32, zero off the map), and `expert_out` "
        "`[N_r, H]`: one row per true map entry (t, e) of any rank with e on rank r, in "
        "ep-permute-dispatch's order (local expert, then source rank, then token index on "
        "the source). A rank is not given the other ranks' maps: where its blocks start "
        "must be exchanged (e.g. the per-expert counts). Rows of the map may hold any "
        "number of experts, none included; `T_r` may be 0; experts may have no tokens.\n\n"
        "Rank r returns `y` `[T_r, H]` in `expert_out`'s dtype: "
        "`y[t] = Σ_e probs[t, e] · out(t, e)` over the experts e of row t of the map, "
        "where `out(t, e)` is expert e's row for token t of rank r; products and sum in "
        "float32, rounded once; a token with no expert gets a zero row.\n\n"
        "The reference exchanges the per-expert counts (`all_to_all_single`), regroups "
        "its rows source-major, sends them home with a variable-split "
        "`all_to_all_single`, and un-permutes with a float32 `index_add_` of the "
        "probability-weighted rows. Only rows of other ranks' tokens must cross the "
        "links; an expert rank holding several of a token's experts can sum them first. "
        "A symmetric-memory kernel can pull each token's rows from the expert ranks' "
        "buffers and accumulate them in registers, fusing the weighting, the un-permute "
        "and the reduction into the transfer."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Sums of at most k float32 products of O(1): other orders move them by ~1e-7. In bf16
    # the one final rounding may then land on the neighbouring value: one ulp, <= 2^-7
    # relative. A missing or doubled term moves the result by its probability, ~1/k.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-3, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 24, "hidden": 16, "experts": 16, "topk": 4}),
        Case(
            "dev-bf16-drop",
            "bfloat16",
            {"tokens": 32, "hidden": 64, "experts": 8, "topk": 3, "drop": 30},
        ),
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
            "demo-skew-drop-empty",
            "bfloat16",
            {
                "tokens": 2048,
                "hidden": 7168,
                "experts": 256,
                "topk": 8,
                "skew": 80,
                "cold": 8,
                "drop": 10,
                "empty_rank": 1,
            },
        ),
    ),
)
