from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(logits: torch.Tensor, labels: torch.Tensor, dloss: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    shard = logits.shape[1]
    logits_f = logits.float()
    row_max = logits_f.amax(dim=1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
    probs = (logits_f - row_max[:, None]).exp()
    sum_exp = probs.sum(dim=1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM)
    probs /= sum_exp[:, None]
    # d loss / d logit = softmax − one_hot(label): only the label's owner subtracts 1.
    local = labels - rank * shard
    owned = (local >= 0) & (local < shard)
    rows = torch.arange(len(labels), device=labels.device)[owned]
    probs[rows, local[owned]] -= 1
    return (probs * dloss[:, None]).to(logits.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    tokens, vocab = case.params["tokens"], case.params["vocab"]
    return {
        "logits": ctx.randn(tokens, vocab // ctx.world_size),
        "labels": ctx.randint(0, vocab, tokens, shared=True),
        "dloss": ctx.randn(tokens, shared=True, dtype=torch.float32),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Per token each rank needs only the global log-sum-exp: its shard folds into one
    # float32 number, and an all-reduce of T of them sends 2(W-1)/W·4T bytes per rank.
    return 2 * (world_size - 1) * case.params["tokens"] * 4 // world_size


PROBLEM = Problem(
    slug="vp-cross-entropy-backward",
    title="Vocab-parallel cross-entropy backward",
    category=Category.VOCAB,
    description=(
        "The gradient of vocab-parallel cross-entropy with respect to the logits. Rank r "
        "holds `logits` `[T, V/W]` for vocabulary entries `[r·V/W, (r+1)·V/W)`; every "
        "rank holds the same `labels` `[T]` (int64, global ids) and the same upstream "
        "gradient `dloss` `[T]` (float32). Rank r returns its shard of "
        "`dloss[t] · (softmax(full logits row t) − one_hot(labels[t]))`, `[T, V/W]` in "
        "the logits' dtype.\n\n"
        "The reference recomputes the softmax in float32 with two all-reduces over "
        "`[T]` (the row maxima with max, then `Σ exp(logit − max)` with sum) and lets the "
        "label's owner subtract one. A rank needs nothing but each row's global "
        "log-sum-exp, one float32 per token; the rest is a pass over the shard that reads "
        "the logits and writes the gradient once, so a kernel is bound by local memory "
        "bandwidth once the small exchange is hidden."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Gradients are ~dloss/V except at the label (~dloss). Float32 math differs from
    # float64 by ~1e-6 relative; the bf16 output's rounding is 2^-9 relative. The absolute
    # floors sit below the smallest entries' size, so a wrong normaliser shows.
    tolerances={
        "float32": Tolerance(atol=1e-9, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-8, rtol=1e-2),
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
