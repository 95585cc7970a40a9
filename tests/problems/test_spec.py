from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from problems import InputContext, all_problems, get_problem
from problems.__main__ import main as problems_main
from problems.spec import SUMS_OVER_RANKS, Category


def _draw(problem, case, rank, seed, world_size=4):
    ctx = InputContext(rank=rank, world_size=world_size, dtype=case.dtype, device="cpu", seed=seed)
    return problem.make_inputs(case, ctx)


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.slug)
def test_it_is_fully_specified(problem):
    assert problem.slug and problem.title and len(problem.description) > 80
    assert isinstance(problem.category, Category)
    assert problem.signature.startswith("solution(")
    assert "def solution" in problem.reference_source
    assert problem.dev_cases and problem.eval_cases
    assert {2, 4}.issubset(problem.world_sizes)
    for case in (*problem.dev_cases, *problem.eval_cases):
        for world_size in problem.world_sizes:
            assert problem.bytes_moved(case, world_size) > 0


def _per_rank_tensors(inputs: dict) -> list:
    """The inputs that differ by rank or seed: tensors drawn per rank (weights are shared)."""
    return [v for v in inputs.values() if isinstance(v, torch.Tensor)]


def _same(a: dict, b: dict) -> bool:
    return all(x.equal(y) for x, y in zip(_per_rank_tensors(a), _per_rank_tensors(b), strict=True))


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.slug)
def test_inputs_repeat_for_a_seed_and_change_with_it(problem):
    case = problem.dev_cases[0]
    first, again = _draw(problem, case, 1, seed=7), _draw(problem, case, 1, seed=7)
    other_seed, other_rank = _draw(problem, case, 1, seed=8), _draw(problem, case, 2, seed=7)
    assert _per_rank_tensors(first), "a problem has tensor inputs"
    assert _same(first, again)
    assert not _same(first, other_seed)
    assert not _same(first, other_rank), "some input must differ between ranks"


def test_the_root_is_drawn_per_trial_and_agreed_by_all_ranks():
    problem = get_problem("broadcast")
    case = problem.dev_cases[0]
    roots = {seed: {_draw(problem, case, r, seed)["root"] for r in range(4)} for seed in range(40)}
    assert all(len(per_rank) == 1 for per_rank in roots.values())
    assert {next(iter(v)) for v in roots.values()} == {0, 1, 2, 3}


def test_version_changes_with_the_tolerance():
    problem = get_problem("all-reduce")
    looser = dataclasses.replace(problem, tolerances={**SUMS_OVER_RANKS, "float32": None})
    assert looser.version != problem.version
    assert get_problem("all-reduce").version == problem.version


def test_unknown_slug_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown problem 'nope'"):
        get_problem("nope")


def test_cli_lists_the_catalog_as_json(capsys):
    assert problems_main(["--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {p["slug"] for p in listed} == {p.slug for p in all_problems()}
    assert all(p["world_sizes"] and p["dtypes"] and p["category"] for p in listed)


def test_cli_table_filters_by_category(capsys):
    assert problems_main(["--category", "collective"]) == 0
    out = capsys.readouterr().out
    assert "all-to-all" in out and "8 problems" in out


def test_version_covers_the_helper_modules_a_problem_uses(monkeypatch):
    import problems.spec as spec
    import problems.tensor._gemm as gemm

    problem, unrelated = get_problem("tp-gemm-allreduce"), get_problem("all-reduce")
    before, unrelated_before = problem.version, unrelated.version
    real = spec.inspect.getsource
    monkeypatch.setattr(
        spec.inspect,
        "getsource",
        lambda obj: real(obj) + ("\n# changed" if obj is gemm else ""),
    )
    assert problem.version != before
    assert unrelated.version == unrelated_before, "a problem without the helper keeps its version"


# What problem sets I-III promise per category (issues #12 and #13 and the sets before).
AT_LEAST = {
    "collective": 8,
    "tensor": 17,
    "sequence": 3,
    "context": 12,
    "vocab": 4,
    "expert": 11,
    "data": 9,
    "fsdp": 9,
    "pipeline": 4,
    "graph": 6,
    "geometric": 5,
    "other": 4,
}


def test_every_category_holds_its_problem_set(capsys):
    assert problems_main(["--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    counts = {c.value: sum(p["category"] == c.value for p in listed) for c in Category}
    short = {c: (counts[c], n) for c, n in AT_LEAST.items() if counts[c] < n}
    assert not short, f"categories below their set (have, need): {short}"
