from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._moe_b import (
    exchange_counts,
    exchange_rows,
    expected_remote_pairs,
    expected_remote_rows,
    pairs_by_expert,
    rank_tokens,
    route,
    router_logits,
    transpose_blocks,
)
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    grad_out: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    expert_out: torch.Tensor,
    num_experts: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    local = num_experts // world_size
    tokens, k = topk_ids.shape
    # The counts tell each expert rank where its (expert, source) blocks start.
    order, per_expert = pairs_by_expert(topk_ids, num_experts)
    held = exchange_counts(per_expert)  # [W sources, L local experts]
    sent, got = per_expert.view(world_size, local).sum(dim=1), held.sum(dim=1)
    # Forward direction: each pair's output gradient and gate weight go to the expert.
    rows = transpose_blocks(exchange_rows(grad_out[order // k], sent, got), held)
    gates = transpose_blocks(exchange_rows(topk_weights.reshape(-1)[order], sent, got), held)
    grad_expert_out = (rows.float() * gates[:, None]).to(grad_out.dtype)
    dots = (rows.float() * expert_out.float()).sum(dim=1)
    # Backward direction: one float32 per pair returns to the token's rank.
    back = exchange_rows(transpose_blocks(dots, held.T), got, sent)
    grad_weights = torch.empty(tokens * k, dtype=torch.float32, device=grad_out.device)
    grad_weights[order] = back
    return grad_expert_out, grad_weights.view(tokens, k)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # Every rank's routing comes from the shared stream, so that each rank can size the
    # expert rows it holds; a rank is handed only its own routing.
    p = case.params
    world_size, k = ctx.world_size, p["topk"]
    local = p["experts"] // world_size
    logits = [
        router_logits(case, ctx, rank_tokens(case, r), shared=True, dtype=torch.float32)
        for r in range(world_size)
    ]
    routing = [route(each, k) for each in logits]
    held = sum(int((ids // local == ctx.rank).sum()) for ids in routing)
    mine = routing[ctx.rank]
    return {
        "grad_out": ctx.randn(len(mine), p["hidden"]),
        "topk_ids": mine,
        "topk_weights": logits[ctx.rank].gather(1, mine).softmax(dim=1),
        "expert_out": ctx.randn(held, p["hidden"]),
        "num_experts": p["experts"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A token's output gradient travels once to each other rank hosting one of its experts
    # (that rank applies it to all of them); per remote pair, its gate weight goes out and
    # its dot product comes back (4 bytes each). Expected counts under the case's routing
    # distribution, averaged over ranks. The rows must reach the expert ranks anyway (for
    # grad_expert_out), so the dot products are best formed there.
    p = case.params
    rows = expected_remote_rows(case, world_size) * p["hidden"] * case.itemsize
    return max(1, int(rows + 8 * expected_remote_pairs(case, world_size)))


PROBLEM = Problem(
    slug="ep-combine-backward",
    title="Backward of the MoE weighted combine (expert-output and gate gradients)",
    category=Category.EXPERT,
    description=(
        "The backward pass of the weighted combine that ends an expert-parallel MoE layer "
        "(Megatron-LM's unpermute and all-to-all backward, DeepEP's combine backward): "
        "the forward computed `y[t] = Σ_j topk_weights[t, j] · out(t, e_tj)` on each "
        "token's rank from expert outputs that live on the experts' ranks, so its "
        "gradients need data from both sides. `E` experts (`num_experts`, a multiple of "
        "W), `L = E/W` per rank, expert e on rank `e // L` as local expert `e % L`. Rank r "
        "holds, as a source: `grad_out` `[T_r, H]` (the case's dtype; `T_r` may be 0), "
        "`topk_ids` `[T_r, k]` (int64, distinct experts per token) and `topk_weights` "
        "`[T_r, k]` (float32); as an expert rank: `expert_out` `[N_r, H]` (the case's "
        "dtype), one row per (token, expert) pair of any rank routed to rank r's experts, "
        "ordered by local expert, then source rank, then the token's index on its source "
        "rank (the order ep-dispatch produces). A rank is not given the other ranks' "
        "routing: it must exchange what it needs (e.g. per-expert counts) to learn where "
        "its blocks start. Routing may be skewed (the last experts get no tokens).\n\n"
        "Rank r returns `(grad_expert_out, grad_weights)`. `grad_expert_out` `[N_r, H]` in "
        "the dtype, same row order as `expert_out`: the row for pair (t, e) of source s is "
        "`topk_weights_s[t, j] · grad_out_s[t]` (j the slot where token t picked e), "
        "multiplied in float32 and rounded to the dtype once. `grad_weights` `[T_r, k]` "
        "float32: `grad_weights[t, j] = Σ_h grad_out[t, h] · out(t, e_tj)[h]`, where "
        "`out(t, e)` is the `expert_out` row that expert e's rank holds for token t of "
        "rank r; products and sum in float32.\n\n"
        "The reference exchanges the per-expert counts (`all_to_all_single`), sends each "
        "pair's output-gradient row and gate weight to the expert's rank (variable-split "
        "`all_to_all_single`), regroups them expert-major, forms both products there, and "
        "sends the k dot products per token back. A token's gradient need travel only once "
        "to each rank holding any of its experts, and only a float per pair comes back. A "
        "symmetric-memory kernel can pull each token's gradient row from its source "
        "straight into the expert-ordered position, fuse the scaling and the dot product "
        "into that pass, and write the dot products into the source's `[T, k]` output."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # grad_expert_out is one float32 product rounded once: at most one bf16 ulp (2^-8
    # relative) apart between correct kernels. grad_weights are H-long float32 dot
    # products of unit rows, of size ~sqrt(H): another summation order moves them by
    # ~1e-6 relative. A gate of the wrong slot or a row of the wrong token moves values
    # by O(1) or more.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-3, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 24, "hidden": 16, "experts": 16, "topk": 4}),
        Case(
            "dev-bf16",
            "bfloat16",
            {"tokens": 32, "hidden": 64, "experts": 8, "topk": 2, "ragged": 3},
        ),
        Case(
            "dev-skew",
            "bfloat16",
            {"tokens": 40, "hidden": 32, "experts": 16, "topk": 2, "skew": 90, "cold": 2},
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {"tokens": 16, "hidden": 16, "experts": 8, "topk": 3, "skew": 50, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-balanced",
            "bfloat16",
            {"tokens": 2048, "hidden": 4096, "experts": 64, "topk": 8},
        ),
        Case(
            "demo-skew-empty",
            "bfloat16",
            {
                "tokens": 4096,
                "hidden": 2048,
                "experts": 32,
                "topk": 4,
                "skew": 70,
                "cold": 2,
                "empty_rank": 1,
            },
        ),
    ),
)
