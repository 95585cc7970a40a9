"""Context- and vocab-parallel references over gloo ranks, against single-process math.

The math reassembles the whole sequence or vocabulary from every rank's inputs and works
in float64 the plain way: full attention with a mask, autograd for the backward, the
delta rule one token at a time, log-softmax over the whole row. It shares no code with the
references, so a wrong reference fails here.
"""

from __future__ import annotations

import math

import pytest
import torch

from problems import all_problems
from tests.problems.harness import WORLD_SIZES, Expected, Inputs, check_against, run_references


def _zigzag_order(world_size: int) -> list[int]:
    """Chunk ids of the zigzag layout in rank order: 0, 2W-1, 1, 2W-2, ..."""
    return [c for r in range(world_size) for c in (r, 2 * world_size - 1 - r)]


def _from_zigzag(parts: list[torch.Tensor], world_size: int) -> torch.Tensor:
    chunks = [half for part in parts for half in part.chunk(2)]
    by_id = dict(zip(_zigzag_order(world_size), chunks, strict=True))
    return torch.cat([by_id[c] for c in range(2 * world_size)])


def _to_zigzag(full: torch.Tensor, world_size: int) -> list[torch.Tensor]:
    chunks = full.chunk(2 * world_size)
    return [torch.cat([chunks[r], chunks[2 * world_size - 1 - r]]) for r in range(world_size)]


def _attention(q, k, v, causal: bool) -> torch.Tensor:
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[0]
        allowed = torch.arange(n)[:, None] >= torch.arange(n)[None, :]
        scores = scores.masked_fill(~allowed, -math.inf)
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def _cat(inputs: Inputs, name: str) -> torch.Tensor:
    return torch.cat([i[name].double() for i in inputs])


def zigzag_ring_attention(inputs: Inputs, w: int) -> list[torch.Tensor]:
    q, k, v = (_from_zigzag([i[n].double() for i in inputs], w) for n in "qkv")
    return _to_zigzag(_attention(q, k, v, causal=True), w)


def ring_attention_backward(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    q, k, v = (_cat(inputs, n).requires_grad_() for n in "qkv")
    _attention(q, k, v, causal=False).backward(_cat(inputs, "dout"))
    grads = [t.grad.chunk(w) for t in (q, k, v)]
    return [tuple(g[r] for g in grads) for r in range(w)]


def halo_conv1d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x, weight = _cat(inputs, "x"), inputs[0]["weight"].double()
    width = weight.shape[1]
    padded = torch.cat([x.new_zeros(width - 1, x.shape[1]), x])
    y = sum(weight[:, j] * padded[j : j + x.shape[0]] for j in range(width))
    return list(y.chunk(w))


def linear_attention_state(inputs: Inputs, w: int) -> list[torch.Tensor]:
    q, k, v = (_cat(inputs, n) for n in "qkv")
    n = q.shape[0]
    mask = (torch.arange(n)[:, None] >= torch.arange(n)[None, :]).double()
    scores = torch.einsum("shk,thk->hst", q, k) * mask
    return list(torch.einsum("hst,thv->shv", scores, v).chunk(w))


def delta_rule(inputs: Inputs, w: int) -> list[torch.Tensor]:
    q, k, v, beta = (_cat(inputs, n) for n in ("q", "k", "v", "beta"))
    state = q.new_zeros(q.shape[1], v.shape[2], k.shape[2])  # [heads, dv, dk]
    outs = []
    for t in range(q.shape[0]):
        predicted = torch.einsum("hvk,hk->hv", state, k[t])
        state = state + beta[t][:, None, None] * torch.einsum("hv,hk->hvk", v[t] - predicted, k[t])
        outs.append(torch.einsum("hvk,hk->hv", state, q[t]))
    return list(torch.stack(outs).chunk(w))


def zigzag_reshuffle(inputs: Inputs, w: int) -> list[torch.Tensor]:
    return _to_zigzag(torch.cat([i["x"] for i in inputs]), w)


def _full_logits(inputs: Inputs) -> torch.Tensor:
    return torch.cat([i["logits"].double() for i in inputs], dim=1)


def cross_entropy(inputs: Inputs, w: int) -> list[torch.Tensor]:
    losses = torch.nn.functional.cross_entropy(
        _full_logits(inputs), inputs[0]["labels"], reduction="none"
    )
    return [losses] * w


def cross_entropy_backward(inputs: Inputs, w: int) -> list[torch.Tensor]:
    logits = _full_logits(inputs).requires_grad_()
    losses = torch.nn.functional.cross_entropy(logits, inputs[0]["labels"], reduction="none")
    losses.backward(inputs[0]["dloss"].double())
    return list(logits.grad.chunk(w, dim=1))


def logprobs_topk(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    logits = _full_logits(inputs)
    logprobs = logits.log_softmax(dim=1)
    labels = inputs[0]["labels"]
    # A stable descending sort keeps equal logits in index order: lower id first.
    order = logits.sort(dim=1, descending=True, stable=True).indices[:, :8]
    result = (logprobs.gather(1, labels[:, None])[:, 0], logprobs.gather(1, order), order)
    return [result] * w


def chunked_cross_entropy(inputs: Inputs, w: int) -> list[torch.Tensor]:
    weight = torch.cat([i["weight"].double() for i in inputs])
    logits = inputs[0]["hidden"].double() @ weight.T
    loss = torch.nn.functional.cross_entropy(logits, inputs[0]["labels"])
    return [loss] * w


EXPECTED: dict[str, Expected] = {
    "cp-zigzag-ring-attention": zigzag_ring_attention,
    "cp-ring-attention-backward": ring_attention_backward,
    "cp-halo-conv1d": halo_conv1d,
    "cp-linear-attention-state": linear_attention_state,
    "cp-delta-rule-state-passing": delta_rule,
    "cp-zigzag-reshuffle": zigzag_reshuffle,
    "vp-cross-entropy": cross_entropy,
    "vp-cross-entropy-backward": cross_entropy_backward,
    "vp-logprobs-topk": logprobs_topk,
    "vp-chunked-cross-entropy": chunked_cross_entropy,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_here_is_in_the_catalog():
    assert set(EXPECTED) <= {p.slug for p in all_problems()}
    vocab = {p.slug for p in all_problems() if p.category == "vocab"}
    assert vocab <= set(EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])
