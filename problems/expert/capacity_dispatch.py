from __future__ import annotations

import torch
import torch.distributed as dist

from problems.expert._moe_b import expected_remote_pairs, rank_tokens, route, router_logits
from problems.spec import EXACT, Case, Category, InputContext, Problem


def _slot_in_expert(topk_ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs in priority order (slot-major: all first choices by token, then all second
    choices, ...): each pair's expert and its position among that expert's pairs."""
    flat = topk_ids.T.reshape(-1)  # index j·T + t
    order = torch.argsort(flat, stable=True)  # by expert, then priority
    counts = torch.bincount(flat, minlength=experts)
    starts = torch.cumsum(counts, dim=0) - counts
    position = torch.empty_like(flat)
    position[order] = torch.arange(len(flat), device=flat.device) - starts[flat[order]]
    return flat, position


def solution(
    x: torch.Tensor, topk_ids: torch.Tensor, num_experts: int, capacity: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    world_size = dist.get_world_size()
    local = num_experts // world_size
    tokens, k = topk_ids.shape
    hidden = x.shape[1]
    expert, position = _slot_in_expert(topk_ids, num_experts)
    kept = position < capacity
    # The dense GShard layout: [E, C, H] per source, zeros where an expert has fewer than
    # C pairs, so every rank sends and receives equal-sized blocks.
    send = x.new_zeros(num_experts, capacity, hidden)
    token = torch.arange(tokens * k, device=x.device) % max(tokens, 1)
    send[expert[kept], position[kept]] = x[token[kept]]
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # [W sources · L, C, H]
    filled = torch.bincount(expert[kept], minlength=num_experts)
    filled_from = torch.empty_like(filled)
    dist.all_to_all_single(filled_from, filled)
    buffer = recv.view(world_size, local, capacity, hidden).transpose(0, 1).contiguous()
    counts = filled_from.view(world_size, local).T.contiguous()
    return buffer, counts, kept.view(k, tokens).T.contiguous()


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens = rank_tokens(case, ctx.rank)
    logits = router_logits(case, ctx, tokens, dtype=torch.float32)
    return {
        "x": ctx.randn(tokens, case.params["hidden"]),
        "topk_ids": route(logits, case.params["topk"]),
        "num_experts": case.params["experts"],
        "capacity": case.params["capacity"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Only kept pairs bound for another rank's experts must travel (not the padding of
    # the dense buffer): E[min(C, pairs)] per (source, expert) under the routing
    # distribution, averaged over ranks. A token kept by several experts of one rank could
    # travel once; that saving is left out. The counts are noise.
    p = case.params
    rows = expected_remote_pairs(case, world_size, capacity=p["capacity"])
    return max(1, int(rows * p["hidden"] * case.itemsize))


PROBLEM = Problem(
    slug="ep-capacity-dispatch",
    title="MoE dispatch with expert capacity and token dropping",
    category=Category.EXPERT,
    description=(
        "The capacity-factor dispatch of GShard and the Switch Transformer (DeepSpeed-MoE's "
        "top-k gating with `capacity_factor`, Megatron-LM's expert capacity with its "
        "position-based drop policy): each expert accepts at most `C` tokens from each "
        "source rank, the rest are dropped, and tokens travel in a fixed-size buffer. `E` "
        "experts (`num_experts`, a multiple of W), `L = E/W` per rank: expert e lives on "
        "rank `e // L` as its local expert `e % L`. Rank r holds `x` `[T_r, H]` (`T_r` may "
        "be 0), `topk_ids` `[T_r, k]` (int64, k distinct experts per token, column j "
        "being the token's j-th choice) and the int `capacity` C.\n\n"
        "Priority: on each source rank, the (token, slot) pairs routed to expert e are "
        "ranked slot first, then token: all first choices (slot 0) in ascending token "
        "index, then all slot-1 pairs in token order, and so on. The first C pairs in "
        "that order are kept, the others dropped. Rank r returns `(buffer, counts, "
        "kept)`: `buffer` `[L, W, C, H]` in x's dtype, where `buffer[l, s, c]` is a "
        "bit-exact copy of the token row of the c-th kept pair of source rank s for expert "
        "`r·L + l` and zeros for `c >= counts[l, s]`; `counts` `[L, W]` int64, the number "
        "of pairs kept there; `kept` `[T_r, k]` bool, whether this rank's pair (t, j) was "
        "kept. Routing may be skewed so that the hot expert drops many tokens while the "
        "last experts get none.\n\n"
        "The reference ranks the pairs with a stable sort, fills a zeroed `[E, C, H]` "
        "send buffer, exchanges it with one equal-split `all_to_all_single` (plus one for "
        "the counts) and transposes the arrivals to expert-major. Only kept rows for "
        "other ranks must cross the links; the padding need not, since a receiver can zero "
        "its own empty slots from the counts. A symmetric-memory kernel can compute each "
        "pair's slot with a per-expert prefix sum and write the row straight into the "
        "owner's buffer, skipping the dense buffer and the padding traffic."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"tokens": 24, "hidden": 16, "experts": 8, "topk": 2, "capacity": 5},
        ),
        Case(
            "dev-bf16",
            "bfloat16",
            {"tokens": 32, "hidden": 32, "experts": 16, "topk": 4, "capacity": 7, "ragged": 2},
        ),
        Case(
            "dev-skew",
            "bfloat16",
            {
                "tokens": 40,
                "hidden": 16,
                "experts": 8,
                "topk": 2,
                "capacity": 8,
                "skew": 80,
                "cold": 1,
            },
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {"tokens": 16, "hidden": 16, "experts": 8, "topk": 2, "capacity": 4, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        # Capacity factor 1.25: C = 1.25 · T·k/E.
        Case(
            "demo-balanced",
            "bfloat16",
            {"tokens": 4096, "hidden": 4096, "experts": 16, "topk": 2, "capacity": 640},
        ),
        # Capacity factor 1.0 under skew: expert 0 gets ~4.6k pairs per source and keeps 1024.
        Case(
            "demo-skew-empty",
            "bfloat16",
            {
                "tokens": 8192,
                "hidden": 2048,
                "experts": 64,
                "topk": 8,
                "capacity": 1024,
                "skew": 50,
                "cold": 4,
                "empty_rank": 1,
            },
        ),
    ),
)
