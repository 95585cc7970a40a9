"""examples/fast, checked without a GPU: it reads as a bundle against the real catalog,
and each solution takes its problem's arguments. Its kernels run in tests/gpu."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import evaluator
from evaluator.__main__ import zip_folder
from evaluator.intake.bundle import read_bundle
from problems.registry import all_problems, get_problem

FAST = Path(__file__).resolve().parents[2] / "examples" / "fast"
COLLECTIVES = {
    "all-gather",
    "all-reduce",
    "all-to-all",
    "broadcast",
    "gather",
    "reduce",
    "reduce-scatter",
    "scatter",
}


def _bundle():
    return read_bundle("fast.zip", zip_folder(FAST), known_slugs=[p.slug for p in all_problems()])


def test_it_reads_as_a_bundle_of_every_collective_and_four_others():
    solutions = set(_bundle().solutions)
    collective = get_problem("all-reduce").category
    assert {s for s in solutions if get_problem(s).category == collective} == COLLECTIVES
    assert len(solutions - COLLECTIVES) >= 4


def test_every_solution_takes_its_problems_arguments():
    for slug, filename in _bundle().solutions.items():
        tree = ast.parse((FAST / filename).read_text())
        (solution,) = [
            n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "solution"
        ]
        theirs = [a.arg for a in solution.args.args]
        ours = list(inspect.signature(get_problem(slug).reference).parameters)
        assert theirs == ours, (slug, theirs, ours)


def test_the_runtime_imports_without_triton(monkeypatch):
    # None in sys.modules makes `import triton` fail, as on a CPU host, even where it is
    # installed; the runtime is imported afresh and must not need it.
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.delattr(evaluator, "runtime", raising=False)
    monkeypatch.delitem(sys.modules, "evaluator.runtime", raising=False)
    monkeypatch.delitem(sys.modules, "evaluator.runtime_triton", raising=False)
    runtime = importlib.import_module("evaluator.runtime")
    assert runtime.symm_buffer and "evaluator.runtime_triton" not in sys.modules
