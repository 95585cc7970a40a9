from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    ensemble: torch.Tensor,
    perturbations: torch.Tensor,
    obs: torch.Tensor,
    obs_var: torch.Tensor,
    obs_index: torch.Tensor,
) -> torch.Tensor:
    # The ensemble mean: one all-reduce of the member sum with the member count on its end.
    total = torch.cat([ensemble.sum(dim=0), ensemble.new_tensor([len(ensemble)])])
    dist.all_reduce(total)
    members = total[-1]
    anomalies = ensemble - total[:-1] / members  # [m_r, n]
    observed = anomalies[:, obs_index]  # [m_r, p]: H A for a pointwise observation operator
    # P_xy = A (H A)^T / (m - 1), summed over every rank's members.
    cross = anomalies.T @ observed / (members - 1)  # [n, p]
    dist.all_reduce(cross)
    # H P H^T is rows obs_index of P_xy; P_yy adds the observation error variances.
    innovation_cov = cross[obs_index] + torch.diag(obs_var)
    # Each member moves by K d_j = P_xy P_yy^{-1} d_j with d_j = y + e_j - H x_j.
    innovations = obs + perturbations - ensemble[:, obs_index]  # [m_r, p]
    factor = torch.linalg.cholesky(innovation_cov)
    weights = torch.cholesky_solve(innovations.T, factor)  # [p, m_r]
    return ensemble + (cross @ weights).T


def _members(case: Case, ctx: InputContext) -> int:
    """Rank r holds members [r·m//W, (r+1)·m//W): uneven when W does not divide m."""
    m, r, w = case.params["m"], ctx.rank, ctx.world_size
    return (r + 1) * m // w - r * m // w


def make_inputs(case: Case, ctx: InputContext) -> dict:
    n, p = case.params["n"], case.params["p"]
    # A smooth shared background (the forecast mean) plus this rank's member spread.
    grid = torch.linspace(0, 6.283185307179586, n, dtype=torch.float64, device=ctx.device)
    background = 2 * torch.sin(grid) + torch.cos(3 * grid)
    members = _members(case, ctx)
    obs_index = torch.randperm(n, generator=ctx.gen(shared=True), device=ctx.device)[:p]
    obs_index = obs_index.sort().values
    truth_error = ctx.randn(p, shared=True)
    obs_var = 0.25 + 0.75 * torch.rand(
        p, generator=ctx.gen(shared=True), device=ctx.device, dtype=torch.float64
    )
    return {
        "ensemble": background + ctx.randn(members, n),
        "perturbations": ctx.randn(members, p) * obs_var.sqrt(),
        "obs": background[obs_index] + truth_error,
        "obs_var": obs_var,
        "obs_index": obs_index,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Fewest: every member must meet every other member's anomaly. A rank all-gathers its
    # m/W members (n float64 each, the mean of its uneven share) and everything else is
    # local; the reference's [n, p] all-reduce is far more when p > m.
    p = case.params
    return (world_size - 1) * p["m"] * p["n"] * 8 // world_size


PROBLEM = Problem(
    slug="other-kalman-fp64",
    title="Ensemble Kalman filter analysis (fp64, members sharded)",
    category=Category.OTHER,
    description=(
        "The analysis step of a stochastic ensemble Kalman filter (perturbed "
        "observations), as run by data-assimilation systems such as DART, PDAF and "
        "EnKF-C with ensemble members spread over processes. Rank r holds its members "
        "`ensemble` `[m_r, n]` (members `[r·m//W, (r+1)·m//W)` of m, so shares are "
        "uneven and some rank holds none when m < W) and their observation perturbations "
        "`perturbations` `[m_r, p]`; every rank holds the same observations `obs` `[p]`, "
        "their error variances `obs_var` `[p]` and the observed state components "
        "`obs_index` `[p]` (int64, sorted, distinct: H picks entries). All floats are "
        "float64. With x̄ the mean over all m members, `A_j = x_j − x̄`, "
        "`P_xy = Σ_j A_j A_j[obs_index]ᵀ / (m − 1)` `[n, p]` and `P_yy = "
        "P_xy[obs_index] + diag(obs_var)`, rank r returns its members updated as "
        "`x_j + P_xy · P_yy⁻¹ · (obs + perturbations_j − x_j[obs_index])`, `[m_r, n]` "
        "float64, rows in its members' order.\n\n"
        "The reference all-reduces the member sum (with the count) for the mean, forms "
        "its members' share of P_xy with one GEMM and all-reduces the `[n, p]` matrix, "
        "then solves with a Cholesky factor of P_yy and applies the gain to its own "
        "innovations. That all-reduce carries n·p values where the ensemble holds only "
        "n·m: an ensemble-space formulation (gather the `[m, p]` observed anomalies, solve "
        "locally, and combine the members' anomalies with the resulting `[m, m]` weights) "
        "moves far less, and a kernel can overlap the mean, the GEMMs and the exchange."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float64 throughout. Two correct orders of the sums and of the solve differ by about
    # cond(P_yy)·sqrt(p)·2^-53 relative: P_yy's eigenvalues lie between 0.25 (the least
    # error variance) and ~(sqrt(p) + sqrt(m))²/(m − 1), so cond stays below ~1e3 and the
    # difference below ~1e-12 on values of O(1). Dividing by m instead of m − 1, or a
    # missing rank in a sum, moves the updates by 1e-3 or more.
    tolerances={"float64": Tolerance(atol=1e-10, rtol=1e-10)},
    dev_cases=(
        Case("dev-fp64", "float64", {"n": 64, "p": 16, "m": 8}),
        Case("dev-uneven", "float64", {"n": 96, "p": 40, "m": 5}),
    ),
    eval_cases=(
        Case("demo-16k-64", "float64", {"n": 16384, "p": 1024, "m": 64}),
        Case("demo-4k-124", "float64", {"n": 4096, "p": 512, "m": 124}),
    ),
)
