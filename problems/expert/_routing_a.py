"""Routing draws, layouts and byte counts shared by the expert-parallel dispatch and combine
problems (ep-dispatch, ep-combine, ep-permute-dispatch, ep-unpermute-combine,
ep-dispatch-fewer-experts, ep-low-latency-dispatch).

Case params the draws read (absent means off):
  tokens, experts, topk   T tokens per rank, E experts, k experts per token
  skew                    percent of tokens whose first choice is expert 0 (the hot expert)
  cold                    the last `cold` experts are never chosen (experts with no tokens)
  empty_rank              this rank holds no tokens at all
  drop                    percent of (token, expert) pairs dropped from a routing map

A problem's version covers this module too (problems.spec hashes the catalog modules a
problem uses).
"""

from __future__ import annotations

from math import comb

import torch
import torch.distributed as dist

from problems.spec import Case, InputContext


def rank_tokens(case: Case, rank: int) -> int:
    """Tokens rank `rank` holds: T, or none on the case's empty rank."""
    return 0 if case.params.get("empty_rank", -1) == rank else case.params["tokens"]


def draw_topk(case: Case, ctx: InputContext, tokens: int, *, shared: bool = False):
    """[tokens, k] int64 distinct experts per token, in descending order of a random score.

    Every non-cold expert scores U[0, 1); hot tokens (skew percent) score 2 on expert 0, so
    it is their slot 0; cold experts score -1 and are never among the k.
    """
    experts, k = case.params["experts"], case.params["topk"]
    skew, cold = case.params.get("skew", 0), case.params.get("cold", 0)
    gen, device = ctx.gen(shared=shared), ctx.device
    hot = torch.rand(tokens, generator=gen, device=device) < skew / 100
    scores = torch.rand(tokens, experts, generator=gen, device=device)
    scores[:, experts - cold :] = -1.0
    scores[:, 0] = torch.where(hot, 2.0, scores[:, 0])
    return scores.topk(k, dim=1).indices


def draw_all_topk(case: Case, ctx: InputContext) -> list[torch.Tensor]:
    """Every rank's top-k ids, drawn from the shared stream: each rank can size what it
    will receive, but is handed only its own ids."""
    world = ctx.world_size
    return [draw_topk(case, ctx, rank_tokens(case, r), shared=True) for r in range(world)]


def draw_routing(case: Case, ctx: InputContext, tokens: int, *, shared: bool = False):
    """Top-k routing as a Megatron routing map `[tokens, E]` (bool) and probabilities
    `[tokens, E]` (float32, a softmax over the k, zero off the map), `drop` percent of the
    (token, expert) pairs then dropped (as by a capacity limit)."""
    experts, k = case.params["experts"], case.params["topk"]
    ids = draw_topk(case, ctx, tokens, shared=shared)
    kept = torch.rand(tokens, k, generator=ctx.gen(shared=shared), device=ctx.device)
    kept = kept >= case.params.get("drop", 0) / 100
    weights = ctx.randn(tokens, k, shared=shared, dtype=torch.float32).softmax(dim=1)
    routing_map = torch.zeros(tokens, experts, dtype=torch.bool, device=ctx.device)
    routing_map.scatter_(1, ids, kept)
    probs = torch.zeros(tokens, experts, dtype=torch.float32, device=ctx.device)
    probs.scatter_(1, ids, weights * kept)
    return routing_map, probs


def gate_weights(ctx: InputContext, tokens: int, k: int) -> torch.Tensor:
    """[tokens, k] float32 router weights: a softmax over each token's k scores."""
    return ctx.randn(tokens, k, dtype=torch.float32).softmax(dim=1)


# --- exchange building blocks (used by the references) --------------------------------


def sort_by_expert(topk_ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (token, slot) indices ordered by expert, then token; and tokens per expert [E]."""
    flat = topk_ids.reshape(-1)
    return flat.argsort(stable=True), torch.bincount(flat, minlength=experts)


def exchange_counts(counts: torch.Tensor) -> torch.Tensor:
    """counts [W * L] of this rank per destination expert -> [W, L]: row s is what source
    rank s sends to each of this rank's L experts."""
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts)
    return received.view(dist.get_world_size(), -1)


def all_to_all_rows(rows: torch.Tensor, send: list[int], receive: list[int]) -> torch.Tensor:
    """Variable-split all-to-all of rows: `send[d]` rows go to rank d, in order."""
    out = rows.new_empty((sum(receive), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), receive, send)
    return out


def regroup(rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Rows in chunks `counts [A, B]` (chunk (a, b) before (a, b+1)) -> chunks in (b, a)
    order, each chunk's rows kept in order: the transpose of the chunk grid."""
    a, b = counts.shape
    chunk = torch.repeat_interleave(
        torch.arange(a * b, device=rows.device), counts.reshape(-1), output_size=len(rows)
    )
    key = (chunk % b) * a + chunk // b
    return rows[key.argsort(stable=True)]


# --- byte model ---------------------------------------------------------------------------


def _miss(pool: int, held: int, picks: int, drop: float) -> float:
    """P(a rank holding `held` of `pool` experts gets none of a token's `picks` uniform
    distinct choices, each choice dropped with probability `drop`)."""
    ways = sum(
        comb(held, j) * comb(pool - held, picks - j) * drop**j for j in range(min(held, picks) + 1)
    )
    return ways / comb(pool, picks)


def expected_peer_rows(case: Case, world_size: int) -> float:
    """Expected (token, remote destination rank) pairs one rank must send, averaged over
    the ranks, under draw_topk's distribution with expert e on rank e // (E/W): the rows
    a dispatch must send when a token bound for several experts of one rank travels
    once (deduplicated), as a combine must return them."""
    p = case.params
    experts, k = p["experts"], p["topk"]
    live = experts - p.get("cold", 0)
    hot, drop = p.get("skew", 0) / 100, p.get("drop", 0) / 100
    per_rank = experts // world_size
    total = 0.0
    for source in range(world_size):
        tokens = rank_tokens(case, source)
        for dest in range(world_size):
            if dest == source:
                continue
            held = max(0, min(live, (dest + 1) * per_rank) - dest * per_rank)
            cold_miss = _miss(live, held, k, drop)
            # A hot token's slot 0 is expert 0, on rank 0; its other k-1 are uniform.
            hot_miss = _miss(live - 1, held - (dest == 0), k - 1, drop) * (
                drop if dest == 0 else 1.0
            )
            total += tokens * (1.0 - (hot * hot_miss + (1 - hot) * cold_miss))
    return total / world_size
