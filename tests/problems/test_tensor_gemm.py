"""Each tensor-parallel GEMM reference, run over gloo by real rank processes, against math.

The expected outputs are float64 matrix products of the full (unsharded) operands, put
together from every rank's inputs in one process: no torch.distributed and no code shared
with the references, so a wrong reference (a wrong shard, a missing rank) is caught.
"""

from __future__ import annotations

import math

import pytest
import torch

from problems import all_problems, get_problem
from problems.spec import DTYPES
from tests.problems.harness import WORLD_SIZES, Expected, Inputs, check_against, run_references


def _cat(inputs: Inputs, name: str, dim: int) -> torch.Tensor:
    """The full operand whose rank-r shard is inputs[r][name], split along `dim`."""
    return torch.cat([i[name].double() for i in inputs], dim=dim)


def _cols(full: torch.Tensor, world_size: int) -> list[torch.Tensor]:
    return list(full.chunk(world_size, dim=1))


def _allgather_gemm_rows(inputs: Inputs, w: int) -> list[torch.Tensor]:
    a = _cat(inputs, "a", 0)
    return [a @ i["b"].double() for i in inputs]


def _allgather_gemm_k(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = _cat(inputs, "x", 0)
    return [x.T @ i["grad_out"].double() for i in inputs]


def _row_parallel_product(inputs: Inputs) -> torch.Tensor:
    return _cat(inputs, "a", 1) @ _cat(inputs, "b", 0)


def _gelu_tanh(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def _mlp(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = inputs[0]["x"].double()
    return [_gelu_tanh(x @ _cat(inputs, "w1", 1)) @ _cat(inputs, "w2", 0)] * w


def _attention(inputs: Inputs, w: int) -> list[torch.Tensor]:
    """Multi-head causal attention of the whole model, from the ranks' head shards."""
    x, d = inputs[0]["x"].double(), inputs[0]["head_dim"]
    # Each rank's wqkv is [its q columns | its k columns | its v columns].
    q_full, k_full, v_full = (
        torch.cat([i["wqkv"].double().chunk(3, dim=1)[part] for i in inputs], dim=1)
        for part in range(3)
    )
    t, heads = x.shape[0], q_full.shape[1] // d
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    outs = []
    for head in range(heads):
        cols = slice(head * d, (head + 1) * d)
        q, k, v = x @ q_full[:, cols], x @ k_full[:, cols], x @ v_full[:, cols]
        scores = (q @ k.T / math.sqrt(d)).masked_fill(future, -math.inf)
        outs.append(scores.softmax(dim=1) @ v)
    return [torch.cat(outs, dim=1) @ _cat(inputs, "wo", 0)] * w


EXPECTED: dict[str, Expected] = {
    "tp-allgather-gemm-rows": _allgather_gemm_rows,
    "tp-allgather-gemm-k": _allgather_gemm_k,
    "tp-gemm-reducescatter-rows": lambda inputs, w: list(_row_parallel_product(inputs).chunk(w)),
    "tp-gemm-reducescatter-cols": lambda inputs, w: _cols(_row_parallel_product(inputs), w),
    "tp-gemm-allreduce": lambda inputs, w: (
        [_cat(inputs, "x", 1) @ _cat(inputs, "w", 0) + inputs[0]["bias"].double()] * w
    ),
    "tp-column-linear-gather": lambda inputs, w: (
        [inputs[0]["x"].double() @ _cat(inputs, "w", 1) + _cat(inputs, "bias", 0)] * w
    ),
    "tp-mlp": _mlp,
    "tp-attention-proj": _attention,
    "tp-decode-gemv": lambda inputs, w: [inputs[0]["x"].double() @ _cat(inputs, "w", 0)] * w,
}
SLUGS = sorted(EXPECTED)


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    """These references at one world size, in one process group: {(slug, case): [per rank]}."""
    world_size = request.param
    return world_size, run_references(SLUGS, world_size, tmp_path_factory.mktemp("rdv"))


def test_every_tensor_gemm_problem_is_in_the_catalog():
    tensor_slugs = {p.slug for p in all_problems() if p.category == "tensor"}
    assert set(SLUGS) <= tensor_slugs


@pytest.mark.parametrize("slug", SLUGS)
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])
    for case in get_problem(slug).dev_cases:
        per_rank = outputs[(slug, case.name)]
        assert all(out.dtype == DTYPES[case.dtype] for out in per_rank), (slug, case.name)
