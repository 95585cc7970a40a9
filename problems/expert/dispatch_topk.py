from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._routing_a import (
    all_to_all_rows,
    draw_topk,
    exchange_counts,
    expected_peer_rows,
    rank_tokens,
    regroup,
    sort_by_expert,
)
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(
    x: torch.Tensor, topk_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    local = num_experts // world_size
    k = topk_ids.shape[1]
    # One copy of a token per chosen expert, ordered by expert then token: experts are
    # numbered rank by rank, so this is also ordered by destination rank.
    order, per_expert = sort_by_expert(topk_ids, num_experts)
    received = exchange_counts(per_expert)  # [W sources, L local experts]
    rows = all_to_all_rows(
        x[order // k], per_expert.view(world_size, local).sum(1).tolist(), received.sum(1).tolist()
    )
    # Arrived source-major (source, expert); experts want expert-major (expert, source).
    return regroup(rows, received), received.T.contiguous()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens = rank_tokens(case, ctx.rank)
    return {
        "x": ctx.randn(tokens, case.params["hidden"]),
        "topk_ids": draw_topk(case, ctx, tokens),
        "num_experts": case.params["experts"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A token goes once to each peer rank hosting one of its experts (the rank can copy it
    # to its experts); the expected number of such rows under the case's routing
    # distribution, averaged over the ranks. The [E] counts are noise beside them.
    rows = expected_peer_rows(case, world_size)
    return max(1, int(rows * case.params["hidden"] * case.itemsize))


PROBLEM = Problem(
    slug="ep-dispatch",
    title="MoE token dispatch all-to-all (top-k routing)",
    category=Category.EXPERT,
    description=(
        "The token dispatch of an expert-parallel MoE layer, as Megatron-LM's all-to-all "
        "token dispatcher and DeepSpeed-MoE run it: each token goes to the ranks of the k "
        "experts its router chose. There are `E` experts (`num_experts`, a multiple of W), "
        "`L = E/W` per rank: expert e lives on rank `e // L` as its local expert `e % L`. "
        "Rank r holds `x` `[T_r, H]` (its tokens) and `topk_ids` `[T_r, k]` (int64, k "
        "distinct experts per token, in any order). `T_r` may differ between ranks and may "
        "be 0; routing may be skewed (one expert receives most tokens, some receive none).\n\n"
        "Rank r returns `(recv_x, counts)`. `counts` `[L, W]` int64: `counts[l, s]` is "
        "the number of rank s's tokens that chose expert `r·L + l`. `recv_x` `[N_r, H]` "
        "in `x`'s dtype, `N_r = Σ counts`: one row per (token, chosen expert) pair that "
        "lands on rank r, a bit-exact copy of the token's row, grouped by local expert l "
        "ascending, within it by source rank s ascending, within that by the token's "
        "index on rank s ascending (each token appears at most once per expert, so the "
        "order is unique). The block of (l, s) starts at row `Σ counts` of all blocks "
        "before it in that order.\n\n"
        "The reference sorts its (token, slot) pairs by expert (stable), exchanges the "
        "per-expert counts with an `all_to_all_single`, sends the token copies with a "
        "second `all_to_all_single` with variable splits (they arrive source-major) and "
        "regroups them expert-major locally. Only rows for other ranks must cross the "
        "links, and a token bound for several experts of one rank need travel only once. "
        "A symmetric-memory kernel can compute every destination offset from the counts "
        "and write each row straight into its final slot in the peer's buffer, with no "
        "send-side sort or receive-side regroup pass."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
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
