"""Each collective reference, run over gloo by real rank processes, against single-process math.

A wrong reference would make every submission judged against it wrong, so the math here is
written independently of the references: plain sums, concatenations and slices.
"""

from __future__ import annotations

import io
import multiprocessing as mp
from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist

from problems import InputContext, all_problems, get_problem

WORLD_SIZES = (2, 4)
SEED = 20261122

Inputs = list[dict]  # one dict of inputs per rank
Expected = Callable[[Inputs, int], list[torch.Tensor]]


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


def _inputs(slug: str, case_name: str, rank: int, world_size: int, seed: int) -> dict:
    problem = get_problem(slug)
    case = next(c for c in problem.dev_cases if c.name == case_name)
    ctx = InputContext(rank=rank, world_size=world_size, dtype=case.dtype, device="cpu", seed=seed)
    return problem.make_inputs(case, ctx)


def _rank_main(rank: int, world_size: int, rendezvous: str, queue: mp.Queue) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size
    )
    outputs = {}
    for problem in all_problems():
        for case in problem.dev_cases:
            inputs = _inputs(problem.slug, case.name, rank, world_size, SEED)
            outputs[(problem.slug, case.name)] = problem.reference(**inputs)
    dist.destroy_process_group()
    # Bytes, not tensors: a tensor crosses processes as a shared-memory handle that dies
    # with this process, which may exit before the parent reads it.
    buffer = io.BytesIO()
    torch.save(outputs, buffer)
    queue.put((rank, buffer.getvalue()))


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    """All references at one world size, in one process group: {(slug, case): [per rank]}."""
    world_size = request.param
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    rendezvous = tmp_path_factory.mktemp("rdv") / "store"
    procs = [
        ctx.Process(target=_rank_main, args=(r, world_size, str(rendezvous), queue))
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    by_rank = {}
    for _ in procs:
        rank, data = queue.get(timeout=120)
        by_rank[rank] = torch.load(io.BytesIO(data))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    keys = by_rank[0].keys()
    return world_size, {k: [by_rank[r][k] for r in range(world_size)] for k in keys}


def test_every_collective_has_independent_math():
    assert {p.slug for p in all_problems() if p.category == "collective"} == set(EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    problem = get_problem(slug)
    for case in problem.dev_cases:
        inputs = [_inputs(slug, case.name, r, world_size, SEED) for r in range(world_size)]
        expected = EXPECTED[slug](inputs, world_size)
        for rank, (got, want) in enumerate(zip(outputs[(slug, case.name)], expected, strict=True)):
            tol = problem.tolerance(case.dtype)
            assert got.dtype == inputs[rank]["x"].dtype, (slug, case.name, rank)
            torch.testing.assert_close(
                got.double(),
                want.double(),
                atol=tol.atol,
                rtol=tol.rtol,
                msg=lambda m, r=rank, c=case.name: f"{slug} {c} rank {r}: {m}",
            )
