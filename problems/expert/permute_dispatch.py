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
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(
    hidden: torch.Tensor, routing_map: torch.Tensor, probs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    tokens, experts = routing_map.shape
    # Permute: walk the map expert by expert, tokens in order (a stable sort by expert).
    by_expert = routing_map.T  # [E, T]
    token_ids = torch.arange(tokens, device=hidden.device).expand(experts, tokens)
    token_ids = token_ids.masked_select(by_expert)
    per_expert = by_expert.sum(dim=1)  # [E] int64
    received = exchange_counts(per_expert)  # [W sources, L local experts]
    send = per_expert.view(world_size, -1).sum(1).tolist()
    receive = received.sum(1).tolist()
    rows = all_to_all_rows(hidden[token_ids], send, receive)
    row_probs = all_to_all_rows(probs.T.masked_select(by_expert), send, receive)
    # Arrived source-major; the expert GEMMs want expert-major.
    return regroup(rows, received), regroup(row_probs, received), received.sum(dim=0)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens = rank_tokens(case, ctx.rank)
    routing_map, probs = draw_routing(case, ctx, tokens)
    return {
        "hidden": ctx.randn(tokens, case.params["hidden"]),
        "routing_map": routing_map,
        "probs": probs,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # A token goes once to each peer rank hosting one of its kept experts, with a float32
    # probability per pair (counted once per row here: a rounding error beside H
    # elements). Expected rows under the case's routing and drops, averaged over ranks.
    rows = expected_peer_rows(case, world_size)
    return max(1, int(rows * (case.params["hidden"] * case.itemsize + 4)))


PROBLEM = Problem(
    slug="ep-permute-dispatch",
    title="MoE permute, all-to-all and sort by local expert (Megatron-style)",
    category=Category.EXPERT,
    description=(
        "The token permutation around the dispatch exchange of Megatron-LM's all-to-all "
        "MoE token dispatcher. `E` experts (a multiple of W), `L = E/W` per rank, expert e "
        "on rank `e // L` as local expert `e % L`. Rank r holds `hidden` `[T_r, H]`, "
        "`routing_map` `[T_r, E]` (bool: token t goes to expert e) and `probs` "
        "`[T_r, E]` (float32 router probabilities, zero where the map is false). A row of "
        "the map may hold any number of experts (top-k routing after capacity drops: "
        "some tokens keep fewer than k, some none); `T_r` may be 0, and some experts "
        "may receive no tokens.\n\n"
        "Rank r returns `(tokens, token_probs, tokens_per_expert)`. `tokens_per_expert` "
        "`[L]` int64: how many (token, expert) pairs of all ranks target its expert "
        "`r·L + l`. `tokens` `[N_r, H]` in `hidden`'s dtype (`N_r = Σ tokens_per_expert`) "
        "holds a bit-exact copy of the token's row for each such pair, grouped by local "
        "expert l ascending, within it by source rank ascending, within that by the "
        "token's index on its source rank ascending; `token_probs` `[N_r]` float32 holds "
        "`probs[t, e]` of the same pair in the same order.\n\n"
        "The reference permutes locally (the map's true entries taken expert by expert, "
        "tokens in order), exchanges the per-expert counts with an `all_to_all_single`, "
        "sends the rows and their probabilities with variable-split `all_to_all_single`s "
        "(they arrive source-major: by source rank, then expert) and sorts the chunks "
        "into expert-major order. That is three passes over the rows besides the "
        "transfer; only rows for other ranks must cross the links, a token bound for "
        "several experts of one rank only once. A symmetric-memory kernel can scan the "
        "map, compute each pair's final offset from the exchanged counts and write rows "
        "directly into the peer's expert-major buffer."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
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
