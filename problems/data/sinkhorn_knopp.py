from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance

EPS = 0.05  # SwAV's entropic regularisation (the scores' temperature)
DIM = 128  # feature size behind the scores (inputs only)


def solution(scores: torch.Tensor, iters: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    batch, prototypes = scores.shape
    total_rows = batch * world_size  # every rank holds the same number of samples
    q = (scores.float() / EPS).exp()
    total = q.sum().reshape(1)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    q /= total
    for _ in range(iters):
        # Every prototype gets the same total mass 1/K over the global batch: its column
        # sum needs every rank's rows.
        column = q.sum(dim=0)
        dist.all_reduce(column, op=dist.ReduceOp.SUM)
        q /= column
        q /= prototypes
        # Every sample gets mass 1/B_global: its row is local.
        q /= q.sum(dim=1, keepdim=True)
        q /= total_rows
    return q * total_rows


def make_inputs(case: Case, ctx: InputContext) -> dict:
    batch, prototypes = case.params["batch"], case.params["prototypes"]
    # Cosine similarities of unit features with unit prototypes, as SwAV's head makes
    # them: each sample leans towards one prototype, so scores / eps spans about ±20.
    protos = F.normalize(ctx.randn(prototypes, DIM, shared=True, dtype=torch.float32), dim=1)
    nearest = ctx.randint(0, prototypes, batch)
    noise = ctx.randn(batch, DIM, dtype=torch.float32) / DIM**0.5
    feats = F.normalize(protos[nearest] + noise, dim=1)
    return {"scores": (feats @ protos.T).to(ctx.dtype), "iters": case.params["iters"]}


def bytes_moved(case: Case, world_size: int) -> int:
    # One all-reduce of the total mass, then one of the K column sums per iteration.
    values = 1 + case.params["iters"] * case.params["prototypes"]
    return 2 * (world_size - 1) * values * 4 // world_size


PROBLEM = Problem(
    slug="dp-sinkhorn-knopp",
    title="Sinkhorn-Knopp assignments normalised over the global batch (SwAV)",
    category=Category.DATA,
    description=(
        "The Sinkhorn-Knopp step of SwAV (and of DINOv2's teacher centering): soft "
        "assignments of samples to K prototypes, constrained so that every prototype "
        "receives an equal share of the whole global batch, which spans every rank. Every "
        "rank holds `scores` `[B, K]` float32 (the same B on every rank; global batch "
        "B_g = W·B) and the int `iters` n. With eps = 0.05, all in float32:\n"
        "1. `Q = exp(scores / eps)`, then `Q /= Σ Q` summed over every rank's entries;\n"
        "2. n times: divide each column k by its sum over all B_g rows of all ranks, "
        "divide by K; then divide each row by its own sum (over its K entries), divide by "
        "B_g;\n"
        "3. return `Q · B_g`, the rank's own `[B, K]` rows in float32 (each row sums to 1).\n"
        "The steps are applied one after another as listed (each a separate division); "
        "fusing them changes the result only within the tolerance.\n\n"
        "The reference follows the steps with PyTorch ops and "
        "`torch.distributed.all_reduce`: one of the total, then one of the K column sums "
        "per iteration. Only 1 + n·K floats per rank cross the links, so the problem is "
        "bound by n + 1 all-reduce latencies and the passes over `[B, K]`: a kernel can "
        "keep its rows in registers or shared memory across iterations, fold the row "
        "normalisation into the next column sum, and push column sums to its peers' "
        "symmetric buffers instead of launching collectives."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Outputs lie in [0, 1]. exp of arguments up to 20 differs by ~1e-6 relative between
    # `s / eps` and `s · (1/eps)`, and every sum over B_g·K or K entries in another order
    # by ~1e-6 relative; a few iterations compound that to ~1e-5. A local instead of a
    # global column sum moves entries by percents.
    tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-4)},
    dev_cases=(
        Case("dev-fp32", "float32", {"batch": 16, "prototypes": 24, "iters": 3}),
        Case("dev-fp32-long", "float32", {"batch": 32, "prototypes": 10, "iters": 7}),
    ),
    eval_cases=(
        # SwAV's 3000 prototypes: 48 MB of scores per rank.
        Case("demo-b4096-k3000", "float32", {"batch": 4096, "prototypes": 3000, "iters": 3}),
        # DINOv2's 65536 prototypes: 128 MB per rank; the column sums are 256 KB.
        Case("demo-b512-k64k", "float32", {"batch": 512, "prototypes": 65536, "iters": 3}),
    ),
)
