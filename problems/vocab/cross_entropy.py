from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    shard = logits.shape[1]
    logits = logits.float()
    # Subtracting the global maximum keeps exp() in range on every rank alike.
    row_max = logits.amax(dim=1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
    shifted = logits - row_max[:, None]
    sum_exp = shifted.exp().sum(dim=1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM)
    # Exactly one rank owns each label; the others contribute zero.
    local = labels - rank * shard
    owned = (local >= 0) & (local < shard)
    target = shifted.gather(1, local.clamp(0, shard - 1)[:, None])[:, 0] * owned
    dist.all_reduce(target, op=dist.ReduceOp.SUM)
    return sum_exp.log() - target


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens, vocab = case.params["tokens"], case.params["vocab"]
    return {
        "logits": ctx.randn(tokens, vocab // ctx.world_size),
        "labels": ctx.randint(0, vocab, tokens, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token, each rank's share folds into two float32 numbers (its shard's
    # log-sum-exp and its target logit, zero if not the owner); an all-reduce of those
    # sends 2(W-1)/W of the 8·T-byte buffer per rank.
    return 2 * (world_size - 1) * case.params["tokens"] * 8 // world_size


PROBLEM = Problem(
    slug="vp-cross-entropy",
    title="Vocab-parallel cross-entropy",
    category=Category.VOCAB,
    description=(
        "Cross-entropy of `T` tokens over a vocabulary of `V` entries whose logits are "
        "split across W ranks by vocabulary, as after a vocab-parallel LM head: rank r "
        "holds `logits` `[T, V/W]` for vocabulary entries `[r·V/W, (r+1)·V/W)` and every "
        "rank holds the same `labels` `[T]` (int64, global ids). Every rank returns the "
        "per-token losses `logsumexp(full logits row) − logit[label]`, `[T]` float32.\n\n"
        "The reference follows Megatron-LM: in float32, an all-reduce (max) of the row "
        "maxima, an all-reduce (sum) of `Σ exp(logit − max)`, and an all-reduce (sum) of "
        "the target logit, which only the owning rank contributes. Per token a rank's "
        "whole contribution fits in two numbers (its shard's log-sum-exp and its target "
        "logit or zero), so one fused all-reduce of `2·T` float32 values suffices, and the "
        "local pass over the logits can read them once."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Losses are ~log(V) ≈ 10 computed in float32 whatever the input dtype; summation order
    # over V terms moves them by ~1e-6. A dropped shard moves a loss by log(W/(W-1)).
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-4, rtol=1e-5),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 16, "vocab": 256}),
        Case("dev-bf16", "bfloat16", {"tokens": 32, "vocab": 1024}),
    ),
    eval_cases=(
        Case("demo-4k-32k", "bfloat16", {"tokens": 4096, "vocab": 32768}),
        Case("demo-4k-128k", "bfloat16", {"tokens": 4096, "vocab": 131072}),
    ),
)
