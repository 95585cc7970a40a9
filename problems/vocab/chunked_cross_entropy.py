from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

CHUNK = 1024


def solution(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    shard = weight.shape[0]
    total = hidden.new_zeros((), dtype=torch.float32)
    # Only CHUNK × V/W logits exist at a time; the full [T, V] never does.
    for start in range(0, hidden.shape[0], CHUNK):
        logits = (hidden[start : start + CHUNK] @ weight.T).float()
        row_max = logits.amax(dim=1)
        dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
        shifted = logits - row_max[:, None]
        sum_exp = shifted.exp().sum(dim=1)
        local = labels[start : start + CHUNK] - rank * shard
        owned = (local >= 0) & (local < shard)
        target = shifted.gather(1, local.clamp(0, shard - 1)[:, None])[:, 0] * owned
        both = torch.stack([sum_exp, target])
        dist.all_reduce(both, op=dist.ReduceOp.SUM)
        total += (both[0].log() - both[1]).sum()
    return total / hidden.shape[0]


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens, width, vocab = case.params["tokens"], case.params["hidden"], case.params["vocab"]
    # Weights scaled by 1/sqrt(hidden) give logits of unit variance.
    weight = ctx.randn(vocab // ctx.world_size, width, dtype=torch.float32) * width**-0.5
    return {
        "hidden": ctx.randn(tokens, width, shared=True),
        "weight": weight.to(ctx.dtype),
        "labels": ctx.randint(0, vocab, tokens, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token, the shard's log-sum-exp and target logit (two float32, all-reduced):
    # 2(W-1)/W of 8·T bytes. The hidden states are already on every rank.
    return 2 * (world_size - 1) * case.params["tokens"] * 8 // world_size


PROBLEM = Problem(
    slug="vp-chunked-cross-entropy",
    title="Vocab-parallel LM head and cross-entropy, chunked",
    category=Category.VOCAB,
    description=(
        "The mean cross-entropy loss of a vocab-parallel LM head without materialising "
        "the logits. Every rank holds the same `hidden` `[T, H]` and `labels` `[T]` "
        "(int64, global ids); rank r holds its shard `weight` `[V/W, H]` of the output "
        "embedding, rows `[r·V/W, (r+1)·V/W)`. Every rank returns the mean over tokens "
        "of `logsumexp(hidden_t·Wᵀ) − hidden_t·W[label_t]`, a float32 scalar.\n\n"
        "The reference walks the tokens in chunks of 1024: a matmul in the input dtype "
        "gives the chunk's logits `[1024, V/W]` (upcast to float32, as Megatron-LM does), "
        "then an all-reduce (max) of the row maxima and one all-reduce (sum) of "
        "`Σ exp(logit − max)` and the owner's target logit. Per token a rank contributes "
        "two numbers, so the exchange is small; the work is the `T·H·V/W` matmul, which a "
        "kernel can fuse with the softmax statistics so that logits never reach memory, "
        "overlapping each chunk's exchange with the next chunk's matmul."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # The loss is ~log(V) + 0.5 ≈ 11. Rounding the logits to bf16 (the reference does,
    # a fused kernel may not) moves each token's loss by ~2^-9 at random; the mean over T
    # tokens moves by far less than 1e-3. A dropped shard or chunk moves it by ≥ 0.1.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-3, rtol=1e-4),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"tokens": 2500, "hidden": 16, "vocab": 128}),
        Case("dev-bf16", "bfloat16", {"tokens": 2048, "hidden": 32, "vocab": 256}),
    ),
    eval_cases=(
        Case("demo-4k-32k", "bfloat16", {"tokens": 4096, "hidden": 2048, "vocab": 32768}),
        Case("demo-8k-32k", "bfloat16", {"tokens": 8192, "hidden": 4096, "vocab": 32768}),
    ),
)
