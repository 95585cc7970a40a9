"""Each tensor-parallel GEMM reference, run over gloo by real rank processes, against math.

The expected outputs are float64 matrix products of the full (unsharded) operands, put
together from every rank's inputs in one process: no torch.distributed and no code shared
with the references, so a wrong reference (a wrong shard, a missing rank) is caught.
"""

from __future__ import annotations

import pytest
import torch

from problems import all_problems, get_problem
from problems.spec import DTYPES
from tests.problems.harness import Expected, Inputs, check_against, run_references

WORLD_SIZES = (2, 4)


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


EXPECTED: dict[str, Expected] = {
    "tp-allgather-gemm-rows": _allgather_gemm_rows,
    "tp-allgather-gemm-k": _allgather_gemm_k,
    "tp-gemm-reducescatter-rows": lambda inputs, w: list(_row_parallel_product(inputs).chunk(w)),
    "tp-gemm-reducescatter-cols": lambda inputs, w: _cols(_row_parallel_product(inputs), w),
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
