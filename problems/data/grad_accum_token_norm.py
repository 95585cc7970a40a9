from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    x: torch.Tensor, labels: torch.Tensor, lengths: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    micro, seq, _ = x.shape
    # The global token count comes first, as in NeMo-RL: every micro-batch's loss is
    # normalised by the tokens of the whole global batch, not by its own.
    tokens = lengths.sum().reshape(1)
    dist.all_reduce(tokens, op=dist.ReduceOp.SUM)
    w32 = weight.float()
    positions = torch.arange(seq, device=x.device)
    # One float32 buffer for the summed weight gradient and the summed loss: one all-reduce.
    summed = torch.zeros(w32.numel() + 1, dtype=torch.float32, device=x.device)
    grad, loss = summed[:-1].view_as(w32), summed[-1:]
    for m in range(micro):
        xm = x[m].float()
        logits = xm @ w32.T  # [S, O]
        lse = logits.logsumexp(dim=1)
        target = logits.gather(1, labels[m][:, None])[:, 0]
        valid = (positions < lengths[m]).float()  # padding tokens contribute nothing
        loss += ((lse - target) * valid).sum()
        dlogits = (logits - lse[:, None]).exp()
        dlogits.scatter_add_(1, labels[m][:, None], -torch.ones_like(dlogits[:, :1]))
        grad += (dlogits * valid[:, None]).T @ xm
    dist.all_reduce(summed, op=dist.ReduceOp.SUM)
    summed /= tokens.float()
    return grad, loss[0], tokens[0]


def _lengths(case: Case, ctx: InputContext) -> torch.Tensor:
    p = case.params
    lengths = ctx.randint(1, p["seq"] + 1, p["micro"])
    # Rank 0's first micro-batch holds no tokens (a packing sampler's leftover), and
    # `empty_rank` holds none at all: both still take part in every collective.
    if p.get("empty_micro") and ctx.rank == 0:
        lengths[0] = 0
    if ctx.rank == p.get("empty_rank", -1):
        lengths.zero_()
    return lengths


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    micro, seq, hidden, out = p["micro"], p["seq"], p["hidden"], p["out"]
    # N(0, 1/H) weights give unit-scale logits whatever H is.
    weight = ctx.randn(out, hidden, shared=True, dtype=torch.float32) * hidden**-0.5
    return {
        "x": ctx.randn(micro, seq, hidden),
        "labels": ctx.randint(0, out, micro, seq),
        "lengths": _lengths(case, ctx),
        "weight": weight.to(ctx.dtype),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Only the [O, H] float32 gradient sum, the loss sum and the token count are reduced:
    # an all-reduce sends 2(W-1)/W of them per rank.
    p = case.params
    buffer = (p["out"] * p["hidden"] + 1) * 4 + 8
    return 2 * (world_size - 1) * buffer // world_size


PROBLEM = Problem(
    slug="dp-grad-accum-token-norm",
    title="Gradient accumulation normalised by the global token count",
    category=Category.DATA,
    description=(
        "Data-parallel gradient accumulation over micro-batches of different lengths, "
        "normalised by the number of tokens of the whole global batch, as Megatron-LM "
        "(`calculate_per_token_loss`) and NeMo-RL do so that a token weighs the same "
        "whichever rank and micro-batch it lands on. Every rank holds `x` `[M, S, H]` "
        "(M micro-batches padded to S tokens, float32 or bfloat16), `labels` `[M, S]` "
        "(int64 in `[0, O)`), `lengths` `[M]` (int64: micro-batch m's tokens are positions "
        "`0 ≤ t < lengths[m]`, the rest is padding whose values mean nothing; a length may "
        "be 0 and a rank may have no tokens at all) and the shared linear layer `weight` "
        "`[O, H]` (the model's head, same dtype as `x`). Per token the loss is the cross "
        "entropy of `logits = x_t @ weightᵀ` against its label.\n\n"
        "Every rank returns `(grad [O, H] float32, loss [] float32, tokens [] int64)`, the "
        "same on every rank: `tokens` N is the number of valid tokens over all ranks and "
        "micro-batches, `loss` is the sum of all their token losses divided by N, and "
        "`grad` is the gradient of that loss with respect to `weight`: "
        "`Σ_tokens (softmax(logits_t) − onehot(label_t)) ⊗ x_t / N` over every rank's valid "
        "tokens. All arithmetic is float32 (inputs upcast, no TF32): logits, log-sum-exp, "
        "softmax and the accumulated gradient; dividing each micro-batch's part by N or "
        "the sum once is equal within the tolerance.\n\n"
        "The reference all-reduces the token count first, then per micro-batch computes "
        "the logits, the masked loss and the weight gradient (two float32 GEMMs), "
        "accumulates them locally, and all-reduces the `[O·H + 1]` sum of gradient and "
        "loss once before dividing by N. Only that sum and the count cross the links; the "
        "work is the 4·M·S·H·O flops of the GEMMs. A kernel can skip the padding, fuse the "
        "softmax into the GEMMs and start reducing gradient tiles while the last "
        "micro-batch is still running."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32 throughout whatever the input dtype. Gradient entries are ~1/sqrt(N·O) (about
    # 1e-4 in the demo cases) and sums over N tokens in another order move them by ~1e-6
    # of that; dropping a micro-batch or normalising by a local count moves them by a
    # large fraction. The loss (~log O) moves by ~1e-6 relative.
    tolerances={
        "float32": Tolerance(atol=1e-7, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-7, rtol=1e-4),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"micro": 3, "seq": 8, "hidden": 16, "out": 12}),
        Case(
            "dev-fp32-empty",
            "float32",
            {"micro": 2, "seq": 6, "hidden": 8, "out": 10, "empty_micro": 1, "empty_rank": 1},
        ),
        Case("dev-bf16", "bfloat16", {"micro": 2, "seq": 16, "hidden": 32, "out": 24}),
    ),
    eval_cases=(
        Case(
            "demo-4x1k-h512-o2k",
            "float32",
            {"micro": 4, "seq": 1024, "hidden": 512, "out": 2048, "empty_micro": 1},
        ),
        Case(
            "demo-4x1k-h1k-o1k-empty",
            "bfloat16",
            {
                "micro": 4,
                "seq": 1024,
                "hidden": 1024,
                "out": 1024,
                "empty_micro": 1,
                "empty_rank": 1,
            },
        ),
    ),
)
