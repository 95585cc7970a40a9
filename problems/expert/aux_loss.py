from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._moe_b import rank_tokens, route, router_logits
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(logits: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    experts = logits.shape[1]
    probs = logits.float().softmax(dim=1)
    picks = torch.bincount(route(logits, topk).reshape(-1), minlength=experts)
    # One all-reduce carries both statistics: pair counts are integers far below 2^24,
    # exact in float32.
    stats = torch.cat([picks.float(), probs.sum(dim=0)])
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    counts, prob_sum = stats[:experts], stats[experts:]
    pairs = counts.sum()  # N·k: every token of the world fills k slots
    tokens = pairs / topk
    loss = experts * ((counts / pairs) * (prob_sum / tokens)).sum()
    return loss, counts.long()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {
        "logits": router_logits(case, ctx, rank_tokens(case, ctx.rank)),
        "topk": case.params["topk"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # E counts and E probability sums (4 bytes each) all-reduced: 2(W-1)/W of them per
    # rank. The [T, E] logits never leave their rank.
    return 2 * (world_size - 1) * case.params["experts"] * 8 // world_size


PROBLEM = Problem(
    slug="ep-aux-loss",
    title="MoE load-balancing loss with global statistics",
    category=Category.EXPERT,
    description=(
        "The load-balancing auxiliary loss of a top-k MoE router (Switch Transformer, "
        "GShard), computed as Megatron-LM does with global statistics: the expert loads "
        "and mean router probabilities are taken over every token of the world, not per "
        "rank. Rank r holds `logits` `[T_r, E]` (the case's dtype; `T_r` differs between "
        "ranks and may be 0 on some rank, never on all) and the int `topk` k. Per token, "
        "`p = softmax(logits)` over the E experts in float32; the token picks the k experts "
        "with the largest logits, equal logits going to the lower expert index first "
        "(logits lie on a coarse grid, so ties are common and matter).\n\n"
        "Let `N = Σ_r T_r`, `c_e` the number of (token, slot) picks of expert e over all "
        "ranks (`Σ_e c_e = N·k`), `f_e = c_e / (N·k)` and `P_e = (Σ_tokens p_e) / N`. "
        "Every rank returns the same `(loss, tokens_per_expert)`: `loss` a 0-d float32 "
        "tensor equal to `E · Σ_e f_e · P_e` (coefficient 1; 1.0 for a perfectly balanced "
        "router), computed in float32 from float32 sums of the probabilities, and "
        "`tokens_per_expert` `[E]` int64, the `c_e`. Routing may be skewed: one expert "
        "takes most tokens and the last ones none.\n\n"
        "The reference computes the softmax and the top-k locally, then all-reduces the "
        "E counts and E probability sums in one float32 `all_reduce` and forms the loss on "
        "every rank. Only 2E numbers cross the links, so the problem is about latency: a "
        "kernel can fuse softmax, top-k and the per-expert sums into one pass over the "
        "logits and push the 2E partials into the peers' symmetric buffers, with no "
        "collective launch."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Float32 sums of up to ~65k probabilities in another order move P_e by ~1e-6 relative;
    # the loss is of order 1..E. Counts are compared exactly, so a wrong tie-break or a
    # missing rank's tokens fails there; a missing rank moves the loss by >1e-2.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-5, rtol=1e-4),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 24, "experts": 8, "topk": 2, "ragged": 2}),
        Case("dev-bf16", "bfloat16", {"tokens": 40, "experts": 16, "topk": 4}),
        Case(
            "dev-skew",
            "bfloat16",
            {"tokens": 32, "experts": 16, "topk": 2, "skew": 90, "cold": 3},
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {"tokens": 16, "experts": 8, "topk": 2, "skew": 50, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-balanced",
            "bfloat16",
            {"tokens": 8192, "experts": 64, "topk": 8, "ragged": 512},
        ),
        Case(
            "demo-skew-empty",
            "bfloat16",
            {"tokens": 8192, "experts": 16, "topk": 2, "skew": 80, "cold": 2, "empty_rank": 1},
        ),
    ),
)
