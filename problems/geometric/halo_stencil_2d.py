from __future__ import annotations

import torch
import torch.distributed as dist

from problems.geometric._grid import grid_shape, swap
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def _neighbours(rank: int, world_size: int) -> tuple[int | None, ...]:
    """(north, south, west, east) ranks in the process grid; None at the domain's edge."""
    rows, cols = grid_shape(world_size)
    row, col = divmod(rank, cols)
    return (
        rank - cols if row > 0 else None,
        rank + cols if row + 1 < rows else None,
        rank - 1 if col > 0 else None,
        rank + 1 if col + 1 < cols else None,
    )


def _jacobi_step(u: torch.Tensor, f: torch.Tensor, peers: tuple[int | None, ...]) -> torch.Tensor:
    north, south, west, east = peers
    # The edge rows and columns go to the neighbours; theirs come back (zeros outside).
    above, below, left, right = swap(
        [(u[0], north), (u[-1], south), (u[:, 0], west), (u[:, -1], east)]
    )
    padded = u.new_zeros(u.shape[0] + 2, u.shape[1] + 2)
    padded[1:-1, 1:-1] = u
    padded[0, 1:-1], padded[-1, 1:-1] = above, below
    padded[1:-1, 0], padded[1:-1, -1] = left, right
    vertical = padded[:-2, 1:-1] + padded[2:, 1:-1]
    horizontal = padded[1:-1, :-2] + padded[1:-1, 2:]
    return (vertical + horizontal + f) * 0.25


def solution(u: torch.Tensor, f: torch.Tensor, steps: int) -> torch.Tensor:
    peers = _neighbours(dist.get_rank(), dist.get_world_size())
    for _ in range(steps):
        u = _jacobi_step(u, f, peers)
    return u


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    rows, cols = grid_shape(ctx.world_size)
    shape = (p["ny"] // rows, p["nx"] // cols)
    return {"u": ctx.randn(*shape), "f": ctx.randn(*shape), "steps": p["steps"]}


def bytes_moved(case: Case, world_size: int) -> int:
    # The busiest rank sends, every step, its edge row to each neighbour above and below
    # and its edge column to each neighbour left and right. (Exchanging T-deep halos once
    # sends as much, plus corners.)
    p = case.params
    rows, cols = grid_shape(world_size)
    per_step = min(2, rows - 1) * p["nx"] // cols + min(2, cols - 1) * p["ny"] // rows
    return p["steps"] * per_step * case.itemsize


PROBLEM = Problem(
    slug="geo-halo-stencil-2d",
    title="Jacobi sweeps of a 5-point stencil with halo exchange on a 2-D process grid",
    category=Category.GEOMETRIC,
    description=(
        "Jacobi iterations for the Poisson equation −Δu = f on a 2-D grid split over a "
        "2-D process grid, the halo-exchange pattern of structured-grid solvers (PETSc "
        "DMDA, AMReX, HPGMG, climate dynamical cores). The global grid is `[NY, NX]` "
        "float32; the process grid has PY × PX ranks, PY × PX = 2 × 1 for W = 2, 2 × 2 "
        "for W = 4 and 4 × 2 for W = 8, filled row-major: rank r sits at process row "
        "`r // PX`, column `r % PX`, and holds the block of grid rows "
        "`[(r//PX)·NY/PY, …)` and columns `[(r%PX)·NX/PX, …)`: `u` (the initial iterate) "
        "and `f` (the right-hand side), both `[NY/PY, NX/PX]` float32, and `steps` (an "
        "int, T). Every rank returns its block of u after T sweeps of "
        "`u'[i, j] = (u[i−1, j] + u[i+1, j] + u[i, j−1] + u[i, j+1] + f[i, j]) / 4` "
        "(grid spacing 1, the 5-point Laplacian), with u = 0 outside the global grid (a "
        "Dirichlet boundary), every sweep reading only the previous sweep's values. The "
        "reference computes `((north + south) + (west + east) + f) · 0.25` in float32.\n\n"
        "Before every sweep the reference swaps edges with its up to four neighbours in "
        "one `batch_isend_irecv`: its first and last rows go north and south, its first "
        "and last columns (strided in memory) go west and east, and what comes back pads "
        "the block (zeros at the domain's edge). The messages are a few KiB and the "
        "sweep is memory-bound, so the exchange is pure latency T times over. A kernel "
        "can put its edges straight into the neighbours' symmetric halo buffers, update "
        "the interior while they travel, fuse the T sweeps (a T-deep halo with corners, "
        "exchanged once, buys T sweeps without talking) and keep the block in on-chip "
        "memory between sweeps."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # A sweep rounds ~4 float32 additions and a scaling on values of order 1 (2^-24 each)
    # and the averaging does not amplify earlier errors, so T sweeps in another order or
    # with fused multiply-adds differ by ~T·1e-7. A missing or stale halo value is off by
    # a quarter of a neighbour, ~0.1.
    tolerances={"float32": Tolerance(atol=1e-5, rtol=1e-5)},
    dev_cases=(
        Case("dev-fp32", "float32", {"ny": 16, "nx": 12, "steps": 3}),
        Case("dev-one-sweep", "float32", {"ny": 8, "nx": 20, "steps": 1}),
    ),
    eval_cases=(
        Case("demo-8k-4-sweeps", "float32", {"ny": 8192, "nx": 8192, "steps": 4}),
        Case("demo-4k-16k-2-sweeps", "float32", {"ny": 4096, "nx": 16384, "steps": 2}),
    ),
)
