from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

# Quintic coefficients tuned so five steps push every singular value into ~[0.7, 1.2].
A, B, C = 3.4445, -4.7750, 2.0315
STEPS = 5
EPS = 1e-7


def solution(g: torch.Tensor) -> torch.Tensor:
    world_size, rank = dist.get_world_size(), dist.get_rank()
    rows = g.shape[0]
    full = g.new_empty((world_size * rows, g.shape[1]))
    dist.all_gather_into_tensor(full, g)
    x = full.float()
    x = x / (x.norm() + EPS)
    # Iterate on the wide orientation so the Gram matrix X X^T is the smaller one.
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(STEPS):
        gram = x @ x.T
        poly = B * gram + C * (gram @ gram)
        x = A * x + poly @ x
    if tall:
        x = x.T
    return x[rank * rows : (rank + 1) * rows].to(g.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    return {"g": ctx.randn(case.params["rows"] // ctx.world_size, case.params["cols"])}


def bytes_moved(case: Case, world_size: int) -> int:
    # Every output row depends on the whole matrix: each rank's R/W rows must reach the
    # W-1 peers (in some form) at least once.
    p = case.params
    return (world_size - 1) * (p["rows"] // world_size) * p["cols"] * case.itemsize


PROBLEM = Problem(
    slug="tp-muon-newton-schulz",
    title="Muon's Newton–Schulz orthogonalisation of a row-sharded gradient",
    category=Category.TENSOR,
    description=(
        "The Muon optimizer replaces a 2-D gradient `G` (`[R, C]`) with an approximately "
        "orthogonal matrix of the same shape, which needs the whole matrix even when the "
        "parameter is sharded by rows. Rank r holds rows `[r*R/W, (r+1)*R/W)` as `g` "
        "(`[R/W, C]`). Every rank returns its own rows of the result (`[R/W, C]`, `g`'s "
        "dtype).\n\n"
        "Math, in float32: `X = G / (||G||_F + 1e-7)`; if R > C work on `X^T` (so the Gram "
        "matrix is the smaller side) and transpose back at the end; five times: "
        "`A = X X^T`, `B = b A + c A A`, `X = a X + B X` with `(a, b, c) = (3.4445, "
        "-4.7750, 2.0315)`.\n\n"
        "The reference all-gathers the rows with `torch.distributed.all_gather_into_tensor` "
        "and every rank runs all fifteen matmuls on the full matrix, then keeps its rows: "
        "W-fold redundant compute. The iteration can instead be split: with row shards, "
        "`X_r X^T` and `B_r X` need only the gathered X, so ranks can each produce their "
        "rows of every product and exchange them over symmetric memory, overlapping the "
        "exchange with the next matmul."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Fifteen float32 matmuls; the polynomial's slope (up to a = 3.44 near 0) amplifies
    # rounding by up to a few hundred over five steps, on entries of size ~1/sqrt(min(R,C)).
    # bfloat16 adds one rounding of the output to 8 significant bits.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-3),
        "bfloat16": Tolerance(atol=2e-3, rtol=1.6e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"rows": 64, "cols": 48}),
        Case("dev-bf16", "bfloat16", {"rows": 32, "cols": 96}),
    ),
    eval_cases=(
        Case("demo-512x1024", "float32", {"rows": 512, "cols": 1024}),
        Case("demo-1024x1024", "float32", {"rows": 1024, "cols": 1024}),
    ),
)
