"""Data-parallel references over gloo ranks, against single-process math.

The math reassembles the global batch from every rank's inputs and works in float64 the
plain way: autograd for the gradients (CLIP, token-normalised accumulation, batch-norm
backward), PyTorch's own batch_norm for the forward, scaling vectors for Sinkhorn-Knopp,
a stable sort of every distance for kNN, and integer bit arithmetic for the bit-exact
compressed all-reduces. It shares no code with the references, so a wrong reference fails.
"""

from __future__ import annotations

import math
from itertools import accumulate

import pytest
import torch
import torch.nn.functional as F

from problems import all_problems, get_problem
from problems.data.ddp_bucketed_allreduce import buckets
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)


def _gpt_shapes(vocab: int, hidden: int, layers: int) -> list[tuple[int, ...]]:
    h = hidden
    shapes = [(vocab, h)]
    for _ in range(layers):
        shapes += [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,)]
        shapes += [(4 * h, h), (4 * h,), (h, 4 * h), (h,)]
    return [*shapes, (h,), (h,)]


def ddp_bucketed_allreduce(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    first = inputs[0]
    mean = sum(i["grads"].double() for i in inputs) / w
    pieces, at = [], 0
    for shape in _gpt_shapes(first["vocab"], first["hidden"], first["layers"]):
        size = math.prod(shape)
        pieces.append(mean[at : at + size].reshape(shape))
        at += size
    assert at == mean.numel()
    return [tuple(pieces)] * w


def grad_accum_token_norm(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    weight = inputs[0]["weight"].double().requires_grad_()
    xs, labels = [], []
    for i in inputs:
        for m, length in enumerate(i["lengths"].tolist()):
            xs.append(i["x"][m, :length].double())
            labels.append(i["labels"][m, :length])
    tokens = sum(len(t) for t in labels)
    loss = F.cross_entropy(torch.cat(xs) @ weight.T, torch.cat(labels), reduction="sum") / tokens
    loss.backward()
    return [(weight.grad, loss.detach(), torch.tensor(tokens))] * w


def _bf16_round(v: torch.Tensor) -> torch.Tensor:
    """float32 -> nearest bf16 (ties to even), by integer arithmetic on the bits."""
    bits = v.view(torch.int32).long() & 0xFFFF_FFFF
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    signed = torch.where(rounded >= 1 << 31, rounded - (1 << 32), rounded)
    return signed.int().view(torch.float32)


def _f32(value: torch.Tensor) -> torch.Tensor:
    # One float64 operation on float32 operands, rounded to float32, is the correctly
    # rounded float32 operation (+, -, *, / alike: 53 >= 2·24 + 2).
    return value.float()


def _bf16_sum_in_order(values: list[torch.Tensor], order: list[int]) -> torch.Tensor:
    total = values[order[0]]
    for r in order[1:]:
        total = _f32(total.double() + values[r].double())
    return total


def bf16_compressed_allreduce(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    corrected = [_f32(i["grad"].double() + i["error"].double()) for i in inputs]
    compressed = [_bf16_round(v) for v in corrected]
    total = _bf16_sum_in_order(compressed, list(range(w)))
    averaged = _bf16_round(_f32(total.double() / w))
    return [
        (averaged, _f32(v.double() - c.double()))
        for v, c in zip(corrected, compressed, strict=True)
    ]


def _round_half_even(x: torch.Tensor) -> torch.Tensor:
    nearest = torch.floor(x + 0.5)
    tie = nearest - x == 0.5
    return torch.where(tie & (nearest % 2 != 0), nearest - 1, nearest)


def int8_compressed_allreduce(inputs: Inputs, w: int) -> list[torch.Tensor]:
    block = inputs[0]["block"]
    grads = [i["grad"].double().view(-1, block) for i in inputs]
    amax = torch.stack([g.abs().amax(dim=1) for g in grads]).amax(dim=0)
    scale = _f32(amax / 127).double()[:, None]
    total = torch.zeros_like(grads[0])
    for g in grads:
        quotient = _f32(g / scale.clamp_min(1e-300)).double()
        total += _round_half_even(torch.where(scale > 0, quotient, 0.0)).clamp(-127, 127)
    out = _f32(_f32(total * scale).double() / w)
    return [out.flatten()] * w


def clip_contrastive_loss(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    dtype = inputs[0]["image"].dtype
    image = torch.cat([i["image"].double() for i in inputs]).requires_grad_()
    text = torch.cat([i["text"].double() for i in inputs]).requires_grad_()
    log_scale = inputs[0]["logit_scale"].double().requires_grad_()

    def unit(f: torch.Tensor) -> torch.Tensor:
        u = f / f.norm(dim=1, keepdim=True)
        # The logits read unit rows rounded to the input dtype; gradients pass straight on.
        rounded = u.detach().float().to(dtype).double()
        return u + (rounded - u.detach())

    logits = log_scale.exp() * unit(image) @ unit(text).T
    target = torch.arange(len(logits))
    loss = sum(F.cross_entropy(m, target, reduction="sum") for m in (logits, logits.T)) / 2
    loss.backward()
    return [
        (loss.detach(), log_scale.grad, gi, gt)
        for gi, gt in zip(image.grad.chunk(w), text.grad.chunk(w), strict=True)
    ]


def distributed_knn(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    database = torch.cat([i["database"].double() for i in inputs])
    queries, k = inputs[0]["queries"].double(), inputs[0]["k"]
    dist2 = ((queries[:, None, :] - database[None, :, :]) ** 2).sum(dim=2)
    # A stable sort keeps equal distances in id order: lower global id first.
    order = dist2.sort(dim=1, stable=True).indices[:, :k]
    return [(dist2.gather(1, order), order)] * w


def sinkhorn_knopp(inputs: Inputs, w: int) -> list[torch.Tensor]:
    # The same iteration as diagonal scalings: Q = diag(b)·P·diag(a), a per prototype,
    # b per sample (the first global normalisation is a constant the columns absorb).
    p = torch.exp(torch.cat([i["scores"].double() for i in inputs]) / 0.05)
    samples, prototypes = p.shape
    a, b = torch.ones(prototypes, dtype=p.dtype), torch.ones(samples, dtype=p.dtype)
    for _ in range(inputs[0]["iters"]):
        a = 1 / (prototypes * (b[:, None] * p).sum(dim=0))
        b = 1 / (samples * (p * a[None, :]).sum(dim=1))
    q = samples * b[:, None] * p * a[None, :]
    return list(q.chunk(w))


def _rows(inputs: Inputs) -> list[int]:
    return [i["x"].shape[0] for i in inputs]


def sync_batchnorm(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    first = inputs[0]
    x = torch.cat([i["x"].double() for i in inputs])
    mean, var = first["running_mean"].double().clone(), first["running_var"].double().clone()
    weight, bias = first["weight"].double(), first["bias"].double()
    y = F.batch_norm(x, mean, var, weight, bias, training=True, momentum=0.1, eps=1e-5)
    return [(part, mean, var) for part in y.split(_rows(inputs))]


def sync_batchnorm_backward(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    x = torch.cat([i["x"].double() for i in inputs]).requires_grad_()
    weight = inputs[0]["weight"].double().requires_grad_()
    bias = torch.zeros_like(weight).requires_grad_()
    y = F.batch_norm(x, None, None, weight, bias, training=True, eps=1e-5)
    y.backward(torch.cat([i["grad_out"].double() for i in inputs]))
    return [(part, weight.grad, bias.grad) for part in x.grad.split(_rows(inputs))]


EXPECTED: dict[str, Expected] = {
    "dp-ddp-bucketed-allreduce": ddp_bucketed_allreduce,
    "dp-grad-accum-token-norm": grad_accum_token_norm,
    "dp-bf16-compressed-allreduce": bf16_compressed_allreduce,
    "dp-int8-compressed-allreduce": int8_compressed_allreduce,
    "dp-clip-contrastive-loss": clip_contrastive_loss,
    "dp-distributed-knn": distributed_knn,
    "dp-sinkhorn-knopp": sinkhorn_knopp,
    "dp-sync-batchnorm": sync_batchnorm,
    "dp-sync-batchnorm-backward": sync_batchnorm_backward,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_data_problem_is_here_and_in_the_catalog():
    data = {p.slug for p in all_problems() if p.category == "data"}
    assert data == set(EXPECTED)
    assert all(slug.startswith("dp-") for slug in data)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


# The ragged and edge facts the cases promise, at every supported world size.


def _all_ranks(slug: str, case: str, w: int) -> Inputs:
    return [rank_inputs(slug, case, r, w) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4, 8])
def test_empty_rank_cases_leave_rank_one_empty_and_others_ragged(w):
    knn = _all_ranks("dp-distributed-knn", "dev-bf16-empty", w)
    assert knn[1]["database"].shape[0] == 0
    assert sum(i["database"].shape[0] for i in knn) == 200
    for slug in ("dp-sync-batchnorm", "dp-sync-batchnorm-backward"):
        empty = _all_ranks(slug, "dev-fp32-empty", w)
        assert _rows(empty)[1] == 0 and sum(_rows(empty)) == 2 * w
        ragged = _rows(_all_ranks(slug, "dev-fp32", w))
        assert min(ragged) > 0 and sum(ragged) == 3 * w
    accum = _all_ranks("dp-grad-accum-token-norm", "dev-fp32-empty", w)
    assert accum[1]["lengths"].sum() == 0, "a rank with no tokens at all"
    assert accum[0]["lengths"][0] == 0 and accum[0]["lengths"].sum() > 0, "an empty micro-batch"


def test_shard_sizes_differ_between_ranks():
    sizes = {tuple(_rows(_all_ranks("dp-sync-batchnorm", "dev-fp32", 8)))}
    sizes |= {
        tuple(i["database"].shape[0] for i in _all_ranks("dp-distributed-knn", "dev-fp32", 8))
    }
    assert all(len(set(s)) > 1 for s in sizes)


def test_knn_has_distance_ties_and_a_shard_shorter_than_k():
    inputs = _all_ranks("dp-distributed-knn", "dev-bf16-empty", 8)
    assert any(0 < i["database"].shape[0] < i["k"] for i in inputs)
    dist2, _ = distributed_knn(inputs, 8)[0]
    assert (dist2[:, 1:] == dist2[:, :-1]).any(), "equal distances inside a top k"


def test_int8_ties_and_zero_blocks_are_exercised():
    inputs = _all_ranks("dp-int8-compressed-allreduce", "dev-fp32-ties", 4)
    block = inputs[0]["block"]
    grads = torch.stack([i["grad"].view(-1, block) for i in inputs])
    amax = grads.abs().amax(dim=(0, 2))
    assert amax[0] == 0 and grads[0, 1].abs().max() == 0 and amax[1] > 0
    steps = grads[:, 2:] / (amax[2:] / 127)[None, :, None]
    assert ((steps - steps.floor()) == 0.5).sum() > 100, "exact ties for round-half-even"


@pytest.mark.parametrize("w", [4, 8])
def test_bf16_planted_elements_depend_on_the_order(w):
    """At the planted elements another order gives other bits, so the check of the
    reference against the rank-order math really tests the order."""
    inputs = _all_ranks("dp-bf16-compressed-allreduce", "dev-fp32", w)
    compressed = [_bf16_round(_f32(i["grad"].double() + i["error"].double())) for i in inputs]
    ranks = list(range(w))
    in_order = _bf16_round(_f32(_bf16_sum_in_order(compressed, ranks).double() / w))
    reverse = _bf16_round(_f32(_bf16_sum_in_order(compressed, ranks[::-1]).double() / w))
    ring = _bf16_round(_f32(_bf16_sum_in_order(compressed, ranks[1:] + ranks[:1]).double() / w))
    planted = torch.arange(10) * 100
    assert (in_order[planted] != reverse[planted]).all()
    assert (in_order[planted] != ring[planted]).all()


def test_bf16_rounding_matches_torch():
    values = torch.randn(1 << 16) * torch.exp(4 * torch.randn(1 << 16))
    assert torch.equal(_bf16_round(values), values.to(torch.bfloat16).float())


def test_ddp_buckets_follow_the_cap():
    problem = get_problem("dp-ddp-bucketed-allreduce")
    for case in (*problem.dev_cases, *problem.eval_cases):
        p = case.params
        numels = [math.prod(s) for s in _gpt_shapes(p["vocab"], p["hidden"], p["layers"])]
        starts = set(accumulate(numels, initial=0))
        ranges = buckets(numels, case.itemsize, p["bucket_cap"])
        assert ranges[0][1] == sum(numels) and ranges[-1][0] == 0, "from the last parameter"
        assert all(a[0] == b[1] for a, b in zip(ranges, ranges[1:], strict=False))
        assert len(ranges) > 2 and all(lo in starts for lo, _ in ranges)
        for lo, hi in ranges[:-1]:
            # Full, and not before its last (lowest) parameter joined it.
            first = min(s for s in starts if s > lo)
            assert (hi - lo) * case.itemsize >= p["bucket_cap"] > (hi - first) * case.itemsize


def test_ddp_bf16_tolerance_covers_any_summation_order():
    # W = 8 unit-scale gradients scaled by 1/8, summed in bf16 in three orders (a ring's,
    # its reverse and a tree's); each must pass against the float64 average, and the worst
    # error must leave headroom.
    tol = get_problem("dp-ddp-bucketed-allreduce").tolerance("bfloat16")
    gen = torch.Generator().manual_seed(0)
    scaled = (torch.randn(8, 1 << 20, generator=gen).to(torch.bfloat16)) * 0.125
    exact = scaled.double().sum(dim=0)

    def chain(order: list[int]) -> torch.Tensor:
        total = scaled[order[0]]
        for r in order[1:]:
            total = total + scaled[r]
        return total

    tree = scaled
    while len(tree) > 1:
        tree = tree[0::2] + tree[1::2]
    for got in (chain(list(range(8))), chain(list(range(7, -1, -1))), tree[0]):
        err = (got.double() - exact).abs()
        assert (err <= 0.5 * (tol.atol + tol.rtol * exact.abs())).all()
