"""Routing draws, exchange steps and byte counts shared by the expert-parallel layer
problems (ep-aux-loss, ep-moe-forward, ep-grouped-gemm-backward, ep-capacity-dispatch,
ep-combine-backward).

Case params the draws read (absent means off):
  tokens, experts, topk   T tokens per rank, E experts, k experts per token
  ragged                  rank r holds T - r·ragged tokens (T differs between ranks)
  empty_rank              this rank holds no tokens at all
  skew                    percent of tokens whose router logit for expert 0 is 8: expert 0
                          is their first choice (the hot expert)
  cold                    the last `cold` experts have logit -16: never chosen

Router logits lie on a grid of 1/16 (exact in bf16 below 16), so a token's logits often
tie: the problems break ties towards the lower expert index, which the references do with
a stable descending sort.

A problem's version covers this module too (problems.spec hashes the catalog modules a
problem uses).
"""

from __future__ import annotations

from functools import cache
from math import comb, exp, lgamma, log, log1p

import torch
import torch.distributed as dist

from problems.spec import Case, InputContext

HOT_LOGIT = 8.0
COLD_LOGIT = -16.0


def rank_tokens(case: Case, rank: int) -> int:
    """Tokens rank `rank` holds: T - rank·ragged, or none on the case's empty rank."""
    if case.params.get("empty_rank", -1) == rank:
        return 0
    return case.params["tokens"] - rank * case.params.get("ragged", 0)


def router_logits(
    case: Case,
    ctx: InputContext,
    tokens: int,
    *,
    shared: bool = False,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """[tokens, E] router logits: N(0, 1) clamped to ±7 on a 1/16 grid, hot tokens at 8 on
    expert 0, cold experts at -16 (so hot and cold never tie with the rest)."""
    experts = case.params["experts"]
    skew, cold = case.params.get("skew", 0), case.params.get("cold", 0)
    drawn = ctx.randn(tokens, experts, shared=shared, dtype=torch.float32)
    logits = (drawn.clamp(-7.0, 7.0) * 16).round() / 16
    hot = torch.rand(tokens, generator=ctx.gen(shared=shared), device=ctx.device) < skew / 100
    logits[:, 0] = torch.where(hot, HOT_LOGIT, logits[:, 0])
    logits[:, experts - cold :] = COLD_LOGIT
    return logits.to(dtype or ctx.dtype)


def route(logits: torch.Tensor, k: int) -> torch.Tensor:
    """[T, k] int64: each token's k largest logits' experts, largest first, equal logits in
    ascending expert order (a stable sort keeps the lower index first)."""
    return logits.float().sort(dim=1, descending=True, stable=True).indices[:, :k]


def weight(ctx: InputContext, fan_in: int, *shape: int, shared: bool = False) -> torch.Tensor:
    """N(0, 1/fan_in) entries, so a layer's outputs have unit scale; drawn in float32,
    scaled, then rounded to the case's dtype once."""
    drawn = ctx.randn(*shape, shared=shared, dtype=torch.float32)
    return (drawn * fan_in**-0.5).to(ctx.dtype)


# --- exchange steps (used by the references) ---------------------------------------------


def pairs_by_expert(topk_ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (token, slot) indices `t·k + j` ordered by expert, then token (a token picks an
    expert at most once); and the number of pairs per expert [E]."""
    flat = topk_ids.reshape(-1)
    return torch.argsort(flat, stable=True), torch.bincount(flat, minlength=experts)


def exchange_counts(per_expert: torch.Tensor) -> torch.Tensor:
    """This rank's pairs per global expert [E] -> [W, L]: entry (s, l) is how many pairs
    source rank s sends to this rank's local expert l."""
    received = torch.empty_like(per_expert)
    dist.all_to_all_single(received, per_expert)
    return received.view(dist.get_world_size(), -1)


def exchange_rows(rows: torch.Tensor, send: torch.Tensor, receive: torch.Tensor) -> torch.Tensor:
    """All-to-all with variable splits: `send[d]` rows (in order) to rank d, `receive[s]`
    rows from rank s, stacked by source."""
    receive_sizes = receive.tolist()
    out = rows.new_empty((sum(receive_sizes), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), receive_sizes, send.tolist())
    return out


def transpose_blocks(rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Rows stored as blocks (a, b) in row-major order of the [A, B] `counts` -> the same
    blocks in (b, a) order, each block's rows kept in order."""
    a, b = counts.shape
    block = torch.repeat_interleave(
        torch.arange(a * b, device=rows.device), counts.reshape(-1), output_size=rows.shape[0]
    )
    return rows[torch.argsort((block % b) * a + block // b, stable=True)]


# --- byte models --------------------------------------------------------------------------
# Under the draw above a token's k experts are a uniform k-subset of the live experts, or,
# for a hot token, expert 0 plus a uniform (k-1)-subset of the other live ones (ties on
# the grid favour lower indices slightly; the models ignore that).


def _live(case: Case) -> int:
    return case.params["experts"] - case.params.get("cold", 0)


def _held(case: Case, world_size: int, rank: int) -> int:
    """Live experts on `rank` when expert e lives on rank e // (E/W)."""
    per_rank = case.params["experts"] // world_size
    return max(0, min(_live(case), (rank + 1) * per_rank) - rank * per_rank)


def expected_remote_rows(case: Case, world_size: int) -> float:
    """Expected (token, other rank holding one of its experts) pairs, per rank on average:
    the rows a dispatch sends when a token travels once to each rank, however many of that
    rank's experts it picked, and the rows a combine returns after summing them there."""
    k, live, hot = case.params["topk"], _live(case), case.params.get("skew", 0) / 100
    total = 0.0
    for source in range(world_size):
        for dest in range(world_size):
            if dest == source:
                continue
            held = _held(case, world_size, dest)
            miss = comb(live - held, k) / comb(live, k)
            miss_hot = 0.0 if dest == 0 else comb(live - 1 - held, k - 1) / comb(live - 1, k - 1)
            hit = 1.0 - (hot * miss_hot + (1 - hot) * miss)
            total += rank_tokens(case, source) * hit
    return total / world_size


def pick_probability(case: Case, expert: int) -> float:
    """P(a token picks `expert`) under the draw."""
    k, live, hot = case.params["topk"], _live(case), case.params.get("skew", 0) / 100
    if expert >= live:
        return 0.0
    as_hot = 1.0 if expert == 0 else (k - 1) / (live - 1)
    return hot * as_hot + (1 - hot) * k / live


def expected_remote_pairs(case: Case, world_size: int, capacity: int | None = None) -> float:
    """Expected (token, expert) pairs bound for another rank's expert, per rank on average,
    at most `capacity` per (source, expert) when given: a source's pair count for an expert
    is Binomial(T_s, P(pick)), tokens being drawn independently."""
    experts = case.params["experts"]
    per_rank = experts // world_size
    total = 0.0
    for source in range(world_size):
        tokens = rank_tokens(case, source)
        for expert in range(experts):
            if expert // per_rank == source:
                continue
            p = pick_probability(case, expert)
            total += tokens * p if capacity is None else _mean_capped(tokens, p, capacity)
    return total / world_size


@cache
def _mean_capped(n: int, p: float, cap: int) -> float:
    """E[min(cap, X)] for X ~ Binomial(n, p), as cap - Σ_{x<cap} (cap - x) P(X = x)."""
    if n == 0 or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return float(min(n, cap))
    short = 0.0
    for x in range(min(cap, n + 1)):
        log_pmf = lgamma(n + 1) - lgamma(x + 1) - lgamma(n - x + 1) + x * log(p)
        short += (cap - x) * exp(log_pmf + (n - x) * log1p(-p))
    return cap - short
