from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

from problems.graph._graph import expected_unique, fetch_rows, my_range, partition_bounds
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    values: torch.Tensor,
    b: torch.Tensor,
    bounds: torch.Tensor,
) -> torch.Tensor:
    lo, hi = my_range(bounds, dist.get_rank())
    # Columns inside the row block read B locally; the others (the halo) are fetched
    # once per distinct column from their owners and appended after the local rows.
    local = (indices >= lo) & (indices < hi)
    halo, slot = torch.unique(indices[~local], return_inverse=True)
    table = torch.cat([b, fetch_rows(b, halo, bounds)]).float()
    columns = torch.empty_like(indices)
    columns[local] = indices[local] - lo
    columns[~local] = (hi - lo) + slot
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_csr_tensor(
            indptr, columns, values.float(), size=(hi - lo, len(table)), device=b.device
        )
        return (a @ table).to(b.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    bounds = partition_bounds(case, ctx)
    lo, hi = my_range(bounds, ctx.rank)
    total = int(bounds[-1].item())
    counts = ctx.randint(0, 2 * p["nnz"] + 1, hi - lo)
    rows = torch.repeat_interleave(torch.arange(hi - lo, device=ctx.device), counts)
    # A `local` share of a row's columns lies within `band` of the diagonal (a graph in
    # locality-preserving order, e.g. after RCM or a space-filling curve); the rest
    # anywhere. Repeated (row, column) pairs merge: the unique keys come out sorted, so
    # columns ascend within each row, as CSR keeps them.
    near = (lo + rows + ctx.randint(-p["band"], p["band"] + 1, len(rows))).clamp(0, total - 1)
    far = ctx.randint(0, total, len(rows))
    cols = torch.where(ctx.randint(0, 100, len(rows)) < p["local"], near, far)
    keys = torch.unique(rows * total + cols)
    rows, cols = keys // total, keys % total
    indptr = torch.cat([rows.new_zeros(1), torch.bincount(rows, minlength=hi - lo).cumsum(0)])
    # N(0, 1/nnz) values: rows of A @ B then have unit scale.
    values = ctx.randn(len(cols), dtype=torch.float32) * p["nnz"] ** -0.5
    return {
        "indptr": indptr,
        "indices": cols,
        "values": values.to(ctx.dtype),
        "b": ctx.randn(hi - lo, p["feat"]),
        "bounds": bounds,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value, as if every row block held the mean `nodes` = n rows: a peer's
    # n·nnz·(1 - local) far columns are uniform, 1/W of them in this block, and each
    # distinct one needs its row of B once. The band adds at most `band` rows per
    # neighbouring block, which this leaves out.
    p = case.params
    n, far = p["nodes"], p["nnz"] * (100 - p["local"]) / 100
    rows = expected_unique(n * far / world_size, n)
    return max(1, round((world_size - 1) * rows * p["feat"] * case.itemsize))


PROBLEM = Problem(
    slug="graph-spmm-row-partition",
    title="Distributed sparse × dense matrix product with a 1-D row partition",
    category=Category.GRAPH,
    description=(
        "The sparse-dense product at the heart of full-graph GCN training with a 1-D "
        "partition (CAGNET's 1-D algorithm, DistGNN, PyG/DGL full-graph training on "
        "several GPUs): `A @ B` with A an N×N sparse matrix (a weighted adjacency) and B "
        "`[N, F]` dense, both split by the same contiguous ragged row blocks. Every rank "
        "holds the same `bounds` `[W+1]` (int64: rank r owns rows "
        "`[bounds[r], bounds[r+1])`, N_r of them; one block is empty in some cases); "
        "rank r holds its rows of A in CSR: `indptr` `[N_r + 1]` (int64, from 0), "
        "`indices` `[nnz_r]` (int64 global column ids, strictly ascending within a row) "
        "and `values` `[nnz_r]` (float32 or bf16), and its rows of B, `b` `[N_r, F]` (same "
        "dtype). Rows hold 0 to 2·nnz entries (empty rows are common); most columns lie "
        "near the diagonal, the rest anywhere. Rank r returns its rows of A @ B, "
        "`[N_r, F]` in B's dtype, products and sums in float32 from the exact input "
        "values, rounded to the dtype once.\n\n"
        "The reference is sparsity-aware: it collects the distinct columns outside its "
        "block, fetches those rows of B from their owners (an all-to-all of counts, a "
        "ragged `all_to_all_single` of ids and one of rows), appends them after its own "
        "rows, remaps the column ids and multiplies with a float32 CSR product "
        "(cuSPARSE on GPUs). One row of B per distinct (column, requesting rank) pair "
        "must cross the links. A kernel can start on the local columns at once, read "
        "remote rows of B straight from the owners' symmetric buffers, and skip the id "
        "round trip and the host syncs on the counts."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Up to 2·nnz float32 products (exact for bf16 inputs) per output, of unit scale in
    # total: another summation order moves it by ~1e-7. bf16 rounds once: two correct
    # kernels differ by at most one ulp (under 2^-7 relative). A missing or doubled entry
    # moves an output by ~nnz^-1/2, at least 0.25 here.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"nodes": 40, "feat": 8, "nnz": 4, "local": 60, "band": 4}),
        Case("dev-bf16", "bfloat16", {"nodes": 64, "feat": 16, "nnz": 6, "local": 50, "band": 8}),
        Case(
            "dev-empty-block",
            "float32",
            {"nodes": 30, "feat": 8, "nnz": 3, "local": 30, "band": 3, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-192k-bf16",
            "bfloat16",
            {"nodes": 196608, "feat": 128, "nnz": 6, "local": 80, "band": 2048},
        ),
        Case(
            "demo-128k-empty-block",
            "float32",
            {"nodes": 131072, "feat": 256, "nnz": 16, "local": 50, "band": 512, "empty_rank": 1},
        ),
    ),
)
