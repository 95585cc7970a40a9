"""Runs problems' references in real gloo rank processes, for comparison with plain math.

    outputs = run_references(slugs, world_size, tmp_dir)   # {(slug, case): [per rank]}
    check_against(slug, world_size, outputs, expected_fn)

`expected_fn(inputs, world_size)` gets every rank's inputs (regenerated here from the same
seed) and returns every rank's expected output: single-process math written without
torch.distributed and independently of the reference, so a wrong reference is caught.

PKB_PROBLEM_TESTS_WORLD_SIZES (default "2,4") picks the world sizes. With
PKB_PROBLEM_TESTS_DEVICE=cuda (on a GPU machine) the ranks run the references over
NCCL, one GPU each, on the same CPU-drawn inputs: the GPU-only code paths (e.g. the flash
attention kernels the ring references call in bf16) are checked against the same math.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from evaluator.candidate.arena import describe
from problems import InputContext, get_problem

SEED = 20261122
DEVICE = os.environ.get("PKB_PROBLEM_TESTS_DEVICE", "cpu")
# CI checks 2 and 4 ranks; PKB_PROBLEM_TESTS_WORLD_SIZES=8 checks 8 (on CPU: 8 gloo ranks).
WORLD_SIZES = tuple(
    int(w) for w in os.environ.get("PKB_PROBLEM_TESTS_WORLD_SIZES", "2,4").split(",")
)

Inputs = list[dict]  # one dict of inputs per rank
Output = torch.Tensor | tuple[torch.Tensor, ...]
Expected = Callable[[Inputs, int], Sequence[Output]]


def rank_inputs(slug: str, case_name: str, rank: int, world_size: int, seed: int = SEED) -> dict:
    problem = get_problem(slug)
    case = next(c for c in (*problem.dev_cases,) if c.name == case_name)
    ctx = InputContext(rank=rank, world_size=world_size, dtype=case.dtype, device="cpu", seed=seed)
    return problem.make_inputs(case, ctx)


def _to(value, device: torch.device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device) for v in value)
    return value


def _rank_main(rank: int, world_size: int, slugs: list[str], rendezvous: str, queue) -> None:
    device = torch.device("cpu")
    kwargs = {}
    if DEVICE == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        "nccl" if DEVICE == "cuda" else "gloo",
        init_method=f"file://{rendezvous}",
        rank=rank,
        world_size=world_size,
        **kwargs,
    )
    outputs = {}
    for slug in slugs:
        for case in get_problem(slug).dev_cases:
            inputs = {
                k: _to(v, device) for k, v in rank_inputs(slug, case.name, rank, world_size).items()
            }
            output = get_problem(slug).reference(**inputs)
            # The evaluator takes only plain Tensors (or tuples or lists of them) from
            # solutions; a reference must return what a solution may.
            assert describe(output) is not None, f"{slug} returns {type(output).__name__}"
            outputs[(slug, case.name)] = _to(output, torch.device("cpu"))
    dist.destroy_process_group()
    # Bytes, not tensors: a tensor crosses processes as a shared-memory handle that dies
    # with this process, which may exit before the parent reads it.
    buffer = io.BytesIO()
    torch.save(outputs, buffer)
    queue.put((rank, buffer.getvalue()))


def _rank_context():
    """Rank processes forked from a server that has imported torch and the catalog once:
    a fresh interpreter per rank (spawn) paid that import for every rank of every module,
    most of these tests' time on two cores. The server is clean (no threads, no CUDA), so
    forking from it is as safe as spawning."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "problems", __name__])
    return ctx


def run_references(slugs: list[str], world_size: int, tmp_dir: Path) -> dict:
    """Every dev case of every slug, in one process group: {(slug, case): [per rank]}."""
    if DEVICE == "cuda" and torch.cuda.device_count() < world_size:
        pytest.skip(f"{world_size} ranks need {world_size} GPUs")
    ctx = _rank_context()
    queue = ctx.Queue()
    rendezvous = tmp_dir / "store"
    procs = [
        ctx.Process(target=_rank_main, args=(r, world_size, slugs, str(rendezvous), queue))
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    by_rank = {}
    deadline = time.monotonic() + 300
    while len(by_rank) < world_size:
        try:
            rank, data = queue.get(timeout=1)
        except queue_module.Empty:
            # A rank that raised has exited non-zero; the others wait in a collective.
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                message = f"reference ranks failed (exit codes {dead}); see stderr"
                raise AssertionError(message) from None
            continue
        by_rank[rank] = torch.load(io.BytesIO(data))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return {k: [by_rank[r][k] for r in range(world_size)] for k in by_rank[0]}


def _as_tuple(value: Output) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def check_against(slug: str, world_size: int, outputs: dict, expected: Expected) -> None:
    """Assert the reference's outputs equal the math's, within the problem's tolerance."""
    problem = get_problem(slug)
    for case in problem.dev_cases:
        inputs = [rank_inputs(slug, case.name, r, world_size) for r in range(world_size)]
        want_all = expected(inputs, world_size)
        got_all = outputs[(slug, case.name)]
        assert len(got_all) == len(want_all) == world_size
        tol = problem.tolerance(case.dtype)
        for rank, (got, want) in enumerate(zip(got_all, want_all, strict=True)):
            got_t, want_t = _as_tuple(got), _as_tuple(want)
            assert len(got_t) == len(want_t), f"{slug} {case.name} rank {rank}: output count"
            for i, (g, w) in enumerate(zip(got_t, want_t, strict=True)):
                where = f"{slug} {case.name} rank {rank} output {i}"
                assert g.shape == w.shape, f"{where}: shape {tuple(g.shape)} vs {tuple(w.shape)}"
                if not g.is_floating_point():
                    assert torch.equal(g, w.to(g.dtype)), f"{where}: integer outputs differ"
                    continue
                torch.testing.assert_close(
                    g.double(),
                    w.double(),
                    atol=tol.atol,
                    rtol=tol.rtol,
                    msg=lambda m, where=where: f"{where}: {m}",
                )
