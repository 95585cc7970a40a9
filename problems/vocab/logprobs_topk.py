from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

K = 8
_LOW = 1 << 32


def _order_keys(values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """int64 keys that order by float32 value, then by lower index on ties: all distinct."""
    bits = (values + 0.0).view(torch.int32)  # + 0.0 turns -0.0 into +0.0
    # Negative floats order backwards as integers: flipping their magnitude bits fixes it.
    ordered = torch.where(bits < 0, bits ^ 0x7FFF_FFFF, bits).long()
    return ordered * _LOW + (_LOW - 1 - indices)


def _decode(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ordered = (keys >> 32).int()
    bits = torch.where(ordered < 0, ordered ^ 0x7FFF_FFFF, ordered)
    return bits.view(torch.float32), _LOW - 1 - (keys & (_LOW - 1))


def solution(
    logits: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    shard = logits.shape[1]
    logits = logits.float()
    row_max = logits.amax(dim=1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
    sum_exp = (logits - row_max[:, None]).exp().sum(dim=1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM)
    lse = row_max + sum_exp.log()
    local = labels - rank * shard
    owned = (local >= 0) & (local < shard)
    target = logits.gather(1, local.clamp(0, shard - 1)[:, None])[:, 0] * owned
    dist.all_reduce(target, op=dist.ReduceOp.SUM)
    # The global top k is among the union of every shard's top k. Keys carry the value and
    # the global index together, so the merge needs one all-gather and breaks ties alike
    # everywhere.
    columns = torch.arange(shard, device=logits.device) + rank * shard
    candidates = _order_keys(logits, columns.expand_as(logits)).topk(K, dim=1).values
    gathered = candidates.new_empty(world_size * len(labels), K)
    dist.all_gather_into_tensor(gathered, candidates)
    per_token = gathered.view(world_size, len(labels), K).permute(1, 0, 2)
    best = per_token.reshape(len(labels), -1).topk(K, dim=1).values
    values, indices = _decode(best)
    return target - lse, values - lse[:, None], indices


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens, vocab = case.params["tokens"], case.params["vocab"]
    return {
        "logits": ctx.randn(tokens, vocab // ctx.world_size),
        "labels": ctx.randint(0, vocab, tokens, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token: the shard's log-sum-exp and target logit (two float32, all-reduced:
    # 2(W-1)/W of 8 bytes) and the shard's top-k candidates (value and index, 8 bytes
    # each, all-gathered: W-1 copies of this rank's k).
    tokens = case.params["tokens"]
    all_reduce = 2 * (world_size - 1) * tokens * 8 // world_size
    return all_reduce + (world_size - 1) * tokens * K * 8


PROBLEM = Problem(
    slug="vp-logprobs-topk",
    title="Vocab-parallel log-probabilities and top-k",
    category=Category.VOCAB,
    description=(
        "Log-probabilities over a vocabulary of `V` entries split across W ranks, as an "
        "RL trainer or sampler needs them: rank r holds `logits` `[T, V/W]` for vocabulary "
        "entries `[r·V/W, (r+1)·V/W)` and every rank holds the same `labels` `[T]` "
        "(int64, global ids). Every rank returns, per token, `(label_logprob [T], "
        "topk_values [T, 8], topk_indices [T, 8])`: the log-softmax of the full row at the "
        "label (float32), and the 8 largest log-probabilities (float32) with their global "
        "vocabulary ids (int64) in descending order. Order is by the logit's value; among "
        "equal logits (common in bf16) the lower id comes first, and the ids must match "
        "exactly.\n\n"
        "The reference computes in float32: all-reduces of the row maxima (max), of "
        "`Σ exp(logit − max)` (sum) and of the label logit (sum, owner only), then each "
        "rank's top 8, which it all-gathers (as int64 keys holding value and id) and "
        "merges into the global top 8. Per token a rank sends two numbers for the "
        "log-sum-exp and its 8 candidates to every peer; the pass over the logits can "
        "produce the shard's log-sum-exp and its top 8 together."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Log-probabilities are ~ -10 computed in float32 whatever the input dtype; summation
    # order moves them by ~1e-6. Indices are compared exactly.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-4, rtol=1e-5),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 16, "vocab": 256}),
        Case("dev-bf16", "bfloat16", {"tokens": 64, "vocab": 1024}),
    ),
    eval_cases=(
        Case("demo-4k-32k", "bfloat16", {"tokens": 4096, "vocab": 32768}),
        Case("demo-1k-128k", "bfloat16", {"tokens": 1024, "vocab": 131072}),
    ),
)
