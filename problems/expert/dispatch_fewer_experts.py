from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._routing_a import (
    all_to_all_rows,
    draw_topk,
    rank_tokens,
    sort_by_expert,
)
from problems.spec import EXACT, Case, Category, InputContext, Problem


def solution(
    x: torch.Tensor, topk_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    k = topk_ids.shape[1]
    # Expert e's replica in this rank's group of E consecutive ranks.
    dest = (rank // num_experts) * num_experts + topk_ids
    order, per_rank = sort_by_expert(dest, world_size)  # by destination rank, then token
    received = torch.empty_like(per_rank)
    dist.all_to_all_single(received, per_rank)
    rows = all_to_all_rows(x[order // k], per_rank.tolist(), received.tolist())
    return rows, received


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens = rank_tokens(case, ctx.rank)
    return {
        "x": ctx.randn(tokens, case.params["hidden"]),
        "topk_ids": draw_topk(case, ctx, tokens),
        "num_experts": case.params["experts"],
    }


def _picks(case: Case, expert: int) -> float:
    """Expected copies of one token sent to `expert` under draw_topk's distribution."""
    p = case.params
    k, live, hot = p["topk"], p["experts"] - p.get("cold", 0), p.get("skew", 0) / 100
    if expert >= live:
        return 0.0
    # A hot token's slot 0 is expert 0; its other k-1 are uniform over the rest.
    hot_picks = 1.0 if expert == 0 else (k - 1) / (live - 1)
    return hot * hot_picks + (1 - hot) * k / live


def bytes_moved(case: Case, world_size: int) -> int:
    # Every copy for an expert other than the one this rank hosts crosses a link (one
    # expert per rank: nothing to deduplicate). Expected copies under the case's routing
    # distribution, averaged over the ranks.
    experts = case.params["experts"]
    copies = sum(
        rank_tokens(case, r) * (case.params["topk"] - _picks(case, r % experts))
        for r in range(world_size)
    )
    return max(1, int(copies / world_size * case.params["hidden"] * case.itemsize))


PROBLEM = Problem(
    slug="ep-dispatch-fewer-experts",
    title="MoE dispatch with fewer experts than ranks (replicated experts)",
    category=Category.EXPERT,
    description=(
        "MoE token dispatch when the expert-parallel group is wider than the number of "
        "experts (a small-E model such as Mixtral's 8 experts spread over more GPUs, as "
        "DeepSpeed-MoE's expert replication and data-parallel expert groups allow): `E` "
        "experts (`num_experts`, W a multiple of E; the cases use E = 2, so at W = 2 "
        "each expert has one replica, at W = 8 four). Rank r hosts one replica of expert "
        "`r % E`. The ranks form W/E groups of E consecutive ranks, each holding every "
        "expert once; a token of rank s bound for expert e goes to the replica in its own "
        "group, rank `(s // E)·E + e`, so ranks of different groups never exchange "
        "tokens. Rank r holds `x` `[T_r, H]` and `topk_ids` `[T_r, k]` (int64, k <= E "
        "distinct experts per token). `T_r` may be 0; routing may be skewed and an expert "
        "may receive nothing.\n\n"
        "Rank r returns `(recv_x, counts)`. `counts` `[W]` int64: `counts[s]` is the "
        "number of rank s's tokens that chose expert `r % E` and go to rank r (0 for "
        "ranks outside r's group). `recv_x` `[Σ counts, H]` in `x`'s dtype: a bit-exact "
        "copy of each such token, ordered by source rank ascending, then by the token's "
        "index on its source ascending (rank r's own tokens included, in place).\n\n"
        "The reference sorts its (token, slot) pairs by destination rank (stable), "
        "exchanges the per-rank counts with an `all_to_all_single` over all W ranks and "
        "the tokens with a second, variable-split one (zero splits outside the group). "
        "Each rank sends (E-1)/E of its copies on average, to E-1 peers only; a kernel "
        "can skip the global collectives, talk to its group over symmetric memory and "
        "write each token straight to its offset in the peer's output."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 24, "hidden": 16, "experts": 2, "topk": 1}),
        Case("dev-bf16-top2", "bfloat16", {"tokens": 32, "hidden": 64, "experts": 2, "topk": 2}),
        Case(
            "dev-skew",
            "bfloat16",
            {"tokens": 40, "hidden": 32, "experts": 2, "topk": 1, "skew": 80},
        ),
        Case(
            "dev-cold-empty",
            "float32",
            {"tokens": 16, "hidden": 16, "experts": 2, "topk": 1, "cold": 1, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case("demo-top1", "bfloat16", {"tokens": 8192, "hidden": 7168, "experts": 2, "topk": 1}),
        Case(
            "demo-skew-empty",
            "bfloat16",
            {
                "tokens": 8192,
                "hidden": 4096,
                "experts": 2,
                "topk": 1,
                "skew": 90,
                "empty_rank": 1,
            },
        ),
    ),
)
