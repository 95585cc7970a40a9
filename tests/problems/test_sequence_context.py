"""Sequence- and context-parallel references, run over gloo by real rank processes, against
single-process math on the whole sequence.

The math here never shards: it concatenates every rank's block into the full tensors, works
in float64 (LayerNorm through autograd, attention as a plain masked softmax over all T keys)
and only then slices out what each rank should hold, so it shares no code path with the
references' exchanges, rings and online softmax.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from problems import Category, all_problems, get_problem
from problems.sequence.layernorm_backward import EPS as LN_EPS
from problems.sequence.reducescatter_rmsnorm import EPS as RMS_EPS
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)


def _cat(inputs: Inputs, key: str, dim: int = 0) -> torch.Tensor:
    return torch.cat([i[key].double() for i in inputs], dim)


def _rmsnorm(inputs: Inputs, w: int):
    summed = torch.stack([i["partial"].double() for i in inputs]).sum(0).chunk(w)
    hidden = [summed[r] + inputs[r]["residual"].double() for r in range(w)]
    weight = inputs[0]["weight"].double()
    rms = [h.pow(2).mean(-1, keepdim=True).add(RMS_EPS).rsqrt() for h in hidden]
    return [(h * s * weight, h) for h, s in zip(hidden, rms, strict=True)]


def _layernorm_backward(inputs: Inputs, w: int):
    gamma = inputs[0]["gamma"].double().requires_grad_()
    beta = torch.zeros_like(gamma, requires_grad=True)
    xs = [i["x"].double().requires_grad_() for i in inputs]
    for x, i in zip(xs, inputs, strict=True):
        y = F.layer_norm(x, x.shape[-1:], gamma, beta, eps=LN_EPS)
        y.backward(i["dy"].double())
    return [(x.grad, gamma.grad, beta.grad) for x in xs]


def _heads(full: torch.Tensor, r: int, w: int) -> torch.Tensor:
    """Head group r of a [T, heads, D] (or [T, 3, heads, D]) tensor."""
    group = full.shape[-2] // w
    return full[..., r * group : (r + 1) * group, :]


def _attention(inputs: Inputs, *, causal: bool):
    q, k, v = (_cat(inputs, name) for name in "qkv")  # [T, heads, D]
    scores = torch.einsum("thd,shd->hts", q, k) * q.shape[-1] ** -0.5
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -torch.inf)
    lse = scores.logsumexp(-1)  # [heads, T]
    out = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v)
    return out, lse


def _ring(inputs: Inputs, w: int):
    out, lse = _attention(inputs, causal=False)
    return list(zip(out.chunk(w), lse.chunk(w, dim=1), strict=True))


EXPECTED: dict[str, Expected] = {
    "sp-reducescatter-rmsnorm": _rmsnorm,
    "sp-layernorm-backward": _layernorm_backward,
    "sp-allgather-linear": lambda inputs, w: [
        _cat(inputs, "x") @ inputs[r]["weight"].double() for r in range(w)
    ],
    "cp-ulysses-seq-to-heads": lambda inputs, w: [
        _heads(_cat(inputs, "x"), r, w) for r in range(w)
    ],
    "cp-ulysses-heads-to-seq": lambda inputs, w: list(_cat(inputs, "x", dim=1).chunk(w)),
    "cp-ulysses-qkv-packed": lambda inputs, w: [
        tuple(_heads(_cat(inputs, "qkv"), r, w).unbind(1)) for r in range(w)
    ],
    "cp-ulysses-attention": lambda inputs, w: list(_attention(inputs, causal=True)[0].chunk(w)),
    "cp-ring-attention": _ring,
    "cp-ring-attention-causal": lambda inputs, w: list(_attention(inputs, causal=True)[0].chunk(w)),
}

# Outputs that are float32 whatever the input dtype; every other output keeps it.
FLOAT32_OUTPUTS = {"sp-layernorm-backward": {1, 2}, "cp-ring-attention": {1}}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    """Every problem here at one world size, in one process group."""
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_is_catalogued_in_its_category():
    for slug in EXPECTED:
        category = Category.SEQUENCE if slug.startswith("sp-") else Category.CONTEXT
        assert get_problem(slug).category == category
    assert set(EXPECTED) <= {p.slug for p in all_problems()}


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_whole_sequence_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])
    for case in get_problem(slug).dev_cases:
        dtype = next(iter(rank_inputs(slug, case.name, 0, world_size).values())).dtype
        for got in outputs[(slug, case.name)]:
            got = got if isinstance(got, tuple) else (got,)
            want = [
                torch.float32 if i in FLOAT32_OUTPUTS.get(slug, ()) else dtype
                for i in range(len(got))
            ]
            assert [g.dtype for g in got] == want, (slug, case.name)
