"""Each collective reference, run over gloo by real rank processes, against single-process math.

A wrong reference would make every submission judged against it wrong, so the math here is
written independently of the references: plain sums, concatenations and slices.
"""

from __future__ import annotations

import pytest
import torch

from problems import all_problems, get_problem
from problems.spec import DTYPES
from tests.problems.harness import WORLD_SIZES, Expected, Inputs, check_against, run_references


def _sum(inputs: Inputs) -> torch.Tensor:
    return torch.stack([i["x"].double() for i in inputs]).sum(0)


def _on_root(inputs: Inputs, value: torch.Tensor) -> list[torch.Tensor]:
    root = inputs[0]["root"]
    return [value if r == root else inputs[r]["x"].new_empty(0) for r in range(len(inputs))]


EXPECTED: dict[str, Expected] = {
    "all-reduce": lambda inputs, w: [_sum(inputs)] * w,
    "all-gather": lambda inputs, w: [torch.cat([i["x"] for i in inputs])] * w,
    "reduce-scatter": lambda inputs, w: list(_sum(inputs).chunk(w)),
    "broadcast": lambda inputs, w: [inputs[inputs[0]["root"]]["x"]] * w,
    "reduce": lambda inputs, w: _on_root(inputs, _sum(inputs)),
    "scatter": lambda inputs, w: list(inputs[inputs[0]["root"]]["x"].chunk(w)),
    "gather": lambda inputs, w: _on_root(inputs, torch.cat([i["x"] for i in inputs])),
    "all-to-all": lambda inputs, w: [
        torch.cat([inputs[j]["x"].chunk(w)[r] for j in range(w)]) for r in range(w)
    ],
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    """All collective references at one world size, in one process group."""
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_collective_has_independent_math():
    assert {p.slug for p in all_problems() if p.category == "collective"} == set(EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_outputs_keep_the_input_dtype(reference_outputs, slug):
    _, outputs = reference_outputs
    for case in get_problem(slug).dev_cases:
        assert {t.dtype for t in outputs[(slug, case.name)]} == {DTYPES[case.dtype]}
