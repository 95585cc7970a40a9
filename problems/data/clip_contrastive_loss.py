from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

EPS = 1e-12  # F.normalize's floor on the norm


def _gather_rows(local: torch.Tensor) -> torch.Tensor:
    """[2, B, ...] per rank -> [W, 2, B, ...]: rank-major, image and text side by side."""
    world_size = dist.get_world_size()
    # Concatenated along dim 0 (the layout every backend accepts), then split by rank.
    out = local.new_empty(world_size * local.shape[0], *local.shape[1:])
    dist.all_gather_into_tensor(out, local.contiguous())
    return out.view(world_size, *local.shape)


def _softmax_grad(
    logits: torch.Tensor, own_lse: torch.Tensor, cross_lse: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """d(sum of both cross entropies)/d(logits) for rows of L (or of Lᵀ): the row's own
    softmax, plus the other direction's softmax of the same entries, minus 2 at the label."""
    grad = (logits - own_lse[:, None]).exp() + (logits - cross_lse[None, :]).exp()
    rows = torch.arange(len(labels), device=logits.device)
    grad[rows, labels] -= 2.0
    return grad


def _normalize_backward(grad: torch.Tensor, unit: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    return (grad - unit * (unit * grad).sum(dim=1, keepdim=True)) / norm


def solution(
    image: torch.Tensor, text: torch.Tensor, logit_scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    batch, dim = image.shape
    total = world_size * batch
    # Raw features travel in their dtype; normalising is per row, so it can happen after.
    gathered = _gather_rows(torch.stack([image, text])).float()
    feats = gathered.transpose(0, 1).reshape(2, total, dim)  # [2, N, D], global row order
    norm = feats.norm(dim=2, keepdim=True).clamp_min(EPS)
    unit = feats / norm
    operand = unit.to(image.dtype).float()  # the GEMMs read unit rows rounded to the dtype
    scale = logit_scale.float().exp()
    mine = slice(rank * batch, (rank + 1) * batch)
    labels = torch.arange(batch, device=image.device) + rank * batch
    # This rank's rows of L = scale·I·Tᵀ (its images against every text) and of Lᵀ (its
    # texts against every image): the columns' log-sum-exps are the other side's rows'.
    by_image = scale * (operand[0, mine] @ operand[1].T)  # [B, N]
    by_text = scale * (operand[1, mine] @ operand[0].T)  # [B, N]
    lse = torch.stack([by_image.logsumexp(dim=1), by_text.logsumexp(dim=1)])
    lse_all = _gather_rows(lse).transpose(0, 1).reshape(2, total)  # [2, N]
    rows = torch.arange(batch, device=image.device)
    nll = (lse[0] - by_image[rows, labels]).sum() + (lse[1] - by_text[rows, labels]).sum()
    grad_image_rows = _softmax_grad(by_image, lse[0], lse_all[1], labels) / 2
    grad_text_rows = _softmax_grad(by_text, lse[1], lse_all[0], labels) / 2
    # Every entry of L lies in exactly one rank's image rows: those give d loss/d log-scale.
    sums = torch.stack([nll, (grad_image_rows * by_image).sum()])
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    grad_unit_image = scale * (grad_image_rows @ operand[1])
    grad_unit_text = scale * (grad_text_rows @ operand[0])
    return (
        sums[0] / 2,
        sums[1],
        _normalize_backward(grad_unit_image, unit[0, mine], norm[0, mine]),
        _normalize_backward(grad_unit_text, unit[1, mine], norm[1, mine]),
    )


def make_inputs(case: Case, ctx: InputContext) -> dict:
    batch, dim = case.params["batch"], case.params["dim"]
    # Raw features of norm ~1, so gradients through the normalisation keep unit scale.
    image = ctx.randn(batch, dim, dtype=torch.float32) / dim**0.5
    # Matching pairs share a direction (cosine ~0.3), as in a model part-way through
    # training, so the diagonal stands out from the negatives without dominating them.
    text = 0.3 * image + ctx.randn(batch, dim, dtype=torch.float32) / dim**0.5
    # CLIP's learnable temperature: log of the logit scale, around log(33).
    logit_scale = 3.5 + 0.5 * ctx.randn(1, shared=True, dtype=torch.float32)[0]
    return {"image": image.to(ctx.dtype), "text": text.to(ctx.dtype), "logit_scale": logit_scale}


def bytes_moved(case: Case, world_size: int) -> int:
    # Each rank's raw image and text features reach every peer (all-gather), then two
    # float32 log-sum-exps per row and two scalars. The [B, N] logits never travel.
    batch, dim = case.params["batch"], case.params["dim"]
    features = 2 * batch * dim * case.itemsize
    return (world_size - 1) * (features + 2 * batch * 4) + 2 * (world_size - 1) * 8 // world_size


PROBLEM = Problem(
    slug="dp-clip-contrastive-loss",
    title="CLIP contrastive loss over the global batch, with its gradients",
    category=Category.DATA,
    description=(
        "The contrastive loss of CLIP as open_clip trains it data-parallel with "
        "`gather_with_grad`: every image is scored against every text of the global "
        "batch, and the gradients flow back to each rank's own features. Every rank holds "
        "`image` and `text` `[B, D]` (float32 or bfloat16; row i of both is a matching "
        "pair) and the shared 0-d float32 `logit_scale` (the log of the temperature "
        "scale). The global batch is rank 0's rows, then rank 1's, ...: N = W·B pairs.\n\n"
        "Math, float32 after upcasting: `u = f / max(‖f‖₂, 1e-12)` per row (F.normalize); "
        "`û = u` rounded to the input dtype (a no-op for float32; the logit GEMMs read "
        "`û`); `s = exp(logit_scale)`; `L = s · Û_img · Û_txtᵀ` `[N, N]` accumulated in "
        "float32 (no TF32); `loss = (CE(L) + CE(Lᵀ)) / 2`, each the SUM over the N rows of "
        "the cross entropy with the diagonal as target (CLIP's mean is `loss / N`; the sum "
        "keeps the gradients at the same scale for every batch size). Every rank returns "
        "`(loss [], grad_logit_scale [], grad_image [B, D], grad_text [B, D])`, all "
        "float32: the loss and d loss/d logit_scale (the same on every rank), and "
        "d loss/d image, d loss/d text for its own rows, through the normalisation. "
        "With `G = dloss/dL = (softmax_rows(L) + softmax_cols(L) − 2·I) / 2`: "
        "`grad_logit_scale = Σ G∘L`; `d û_img = s·G·Û_txt`, `d û_txt = s·Gᵀ·Û_img` "
        "(the rounding passes gradients straight through, as autograd's cast does); "
        "`grad_f = (dû − u·(u·dû)) / max(‖f‖, 1e-12)` per row.\n\n"
        "The reference all-gathers the raw features (one `all_gather_into_tensor` of "
        "`[2, B, D]`), normalises all N rows, computes its B rows of L and of Lᵀ (two "
        "`[B, N]` float32 GEMMs), all-gathers the 2B row log-sum-exps (a column of L's "
        "softmax needs only its column's log-sum-exp, which is a row of Lᵀ on the rank "
        "owning that text), all-reduces two scalars and finishes with two more `[B, N]` "
        "GEMMs: no `[N, D]` gradient is reduce-scattered. The features (2·B·D in the "
        "dtype) and 2B floats per rank must cross the links; the work is 8·B·N·D flops. A "
        "kernel can start on its own diagonal block while the peers' features arrive and "
        "fuse the softmax, the gradient and both GEMMs flash-attention style."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Raw features have norm ~1, so feature gradients keep one scale at every size (0.2 in
    # the demo cases, up to ~10 in dev), the loss ~N and its scale's gradient ~N. Logits
    # of size s ~ 33 computed in float32 in another order move by ~s·1e-7, softmaxes and
    # gradients by ~1e-5 relative (measured 1e-5 absolute at B=1024, D=512, W=4). In bf16
    # a unit feature computed with other float32 roundings can round to the neighbouring
    # bf16 value (a few elements per million); the matching pair's gradient then moves by
    # up to s·(one bf16 ulp of ~1/sqrt(D)) < 1e-2, and a kernel that rounds G to bf16 for
    # the backward GEMMs moves gradients by ~2^-9 of their scale. A missing column term, a
    # local-only softmax or a wrong temperature is off by tens of percent.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-2, rtol=2e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"batch": 8, "dim": 16}),
        Case("dev-bf16", "bfloat16", {"batch": 16, "dim": 32}),
    ),
    eval_cases=(
        # W=4: N=4096, 17 GFLOP per rank (float32 GEMMs; ~1.3 ms measured at W=2).
        Case("demo-b1024-d512", "float32", {"batch": 1024, "dim": 512}),
        # W=4: N=4096, 26 GFLOP per rank.
        Case("demo-b1024-d768", "bfloat16", {"batch": 1024, "dim": 768}),
    ),
)
