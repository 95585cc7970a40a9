from __future__ import annotations

import torch
import torch.distributed as dist

from problems.fsdp._mesh import pair_group, stride_group
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(
    w_shard: torch.Tensor, x: torch.Tensor, grad_y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    fsdp, tp = stride_group(), pair_group()
    fsdp_size = dist.get_world_size() // 2
    # Forward: rebuild this TP rank's column shard of the weight from its FSDP group.
    weight = w_shard.new_empty(fsdp_size * w_shard.shape[0], w_shard.shape[1])
    dist.all_gather_into_tensor(weight, w_shard, group=fsdp)
    y = x @ weight.T
    # Backward: the input gradient sums the two column shards' contributions over TP.
    grad_x = grad_y @ weight
    dist.all_reduce(grad_x, op=dist.ReduceOp.SUM, group=tp)
    # The weight gradient, rounded to the dtype as autograd gives it, is reduce-scattered
    # in float32 over the FSDP group and averaged over the data-parallel batches.
    grad_weight = (grad_y.T @ x).float()
    grad_shard = grad_weight.new_empty(w_shard.shape)
    dist.reduce_scatter_tensor(grad_shard, grad_weight, op=dist.ReduceOp.SUM, group=fsdp)
    grad_shard.mul_(1.0 / fsdp_size)  # a power of two: exact
    return y, grad_x, grad_shard


def _scales(m: int, k: int, n: int) -> tuple[float, float, float]:
    """Standard deviations of x, the weight and grad_y that give y (a sum over K), grad_x
    (over the N/2 columns of a TP shard) and each rank's weight gradient (over M tokens)
    unit scale: one tolerance per dtype then fits every case."""
    sx = (n / (2 * k * m)) ** 0.25
    return sx, 1 / (sx * k**0.5), 1 / (sx * m**0.5)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    m, k, n = case.params["m"], case.params["k"], case.params["n"]
    world_size, rank = ctx.world_size, ctx.rank
    sx, sw, sg = _scales(m, k, n)
    # Both ranks of a TP pair see the same batch: it is drawn from a seed per pair, itself
    # drawn from the trial's shared stream.
    seeds = ctx.randint(0, 1 << 62, world_size // 2, shared=True)
    pair = torch.Generator(device=ctx.device)
    pair.manual_seed(int(seeds[rank // 2]))
    x = torch.randn(m, k, generator=pair, device=ctx.device) * sx
    rows = n // world_size  # (N/2) / (W/2)
    return {
        "w_shard": (ctx.randn(rows, k, dtype=torch.float32) * sw).to(ctx.dtype),
        "x": x.to(ctx.dtype),
        "grad_y": (ctx.randn(m, n // 2, dtype=torch.float32) * sg).to(ctx.dtype),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # FSDP all-gather of the N/2 x K TP shard (W/2 - 1 pieces of N/W rows leave each
    # rank), the TP all-reduce of grad_x over 2 ranks (half of [M, K] out, half of the sum
    # back: M·K elements), and the FSDP reduce-scatter of the weight gradient, whose
    # local values are of the dtype (W/2 - 1 pieces of N/W rows).
    m, k, n = case.params["m"], case.params["k"], case.params["n"]
    fsdp = world_size // 2
    return (2 * (fsdp - 1) * (n // world_size) * k + m * k) * case.itemsize


PROBLEM = Problem(
    slug="fsdp-2d-mesh-step",
    title="2-D FSDP x TP mesh: column-parallel linear forward and backward",
    category=Category.FSDP,
    description=(
        "One layer's step on a 2-D device mesh, FSDP over data-parallel ranks and tensor "
        "parallelism inside each pair (torchtitan's FSDP2 + TP, Megatron-LM's TP with a "
        "distributed optimizer): a column-parallel linear `y = x @ weightᵀ`, `weight` "
        "`[N, K]` (no bias), whose TP shards are further sharded by FSDP. The W ranks form "
        "a (W/2) x 2 mesh: rank r has dp index d = r // 2 and tp index t = r % 2. Its TP "
        "group is the pair {2d, 2d+1}; its FSDP group is the W/2 ranks with the same t, "
        "{t, t+2, t+4, ...}, in which its index is d (at W = 2 the FSDP dimension has size "
        "1: no FSDP communication). TP rank t owns weight rows `[t·N/2, (t+1)·N/2)` (output "
        "columns of y), and rank r holds `w_shard` `[N/W, K]`, rows "
        "`[t·N/2 + d·N/W, t·N/2 + (d+1)·N/W)` of the weight. It also holds its dp group's "
        "batch `x` `[M, K]` (the same on both ranks of a pair) and the gradient of its "
        "column shard of y, `grad_y` `[M, N/2]`, all in the case's dtype.\n\n"
        "Every rank returns `(y [M, N/2], grad_x [M, K], grad_w_shard [N/W, K])`:\n"
        "- `y = x @ W_tᵀ`, W_t the `[N/2, K]` TP shard (gathered over the FSDP group in d "
        "order), in the dtype (float32 accumulation, one rounding);\n"
        "- `grad_x = Σ over the TP pair of (grad_y @ W_t)`: each rank's product rounded to "
        "the dtype, then the two added and rounded to the dtype once;\n"
        "- `grad_w_shard`, float32: rows `[d·N/W, (d+1)·N/W)` of "
        "`(1/(W/2))·Σ over the FSDP group of (grad_yᵀ @ x)`, each rank's `[N/2, K]` "
        "product rounded to the dtype (as autograd gives it) and the sum over the group "
        "taken in float32, in any order (FSDP2's reduce_dtype=float32, averaged over the "
        "W/2 data-parallel batches).\n\n"
        "The reference creates the row and column process groups once (`dist.new_group`, "
        "every rank creating every group in the same order), then calls "
        "`all_gather_into_tensor` over the FSDP group, the three GEMMs, `all_reduce` of "
        "grad_x over the pair and `reduce_scatter_tensor` (sum) of the weight gradient over "
        "the FSDP group, scaled by 2/W. A rank must send its weight shard to W/2 − 1 "
        "peers, half of its `[M, K]` partial of grad_x and its sum's half back, and W/2 − 1 "
        "row blocks of its weight gradient (values of the dtype, so they can travel in it "
        "and be added in float32 on arrival). Each collective can hide behind a GEMM: the "
        "weight gather behind the start of the forward GEMM, the grad_x reduction behind "
        "the weight gradient GEMM, and the reduce-scatter tile by tile over symmetric "
        "memory as the weight gradient's tiles finish."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32: GEMM accumulation order and short float32 sums, ~1e-6 at unit scale (no
    # TF32). bfloat16: y is one rounded GEMM (rtol). grad_x adds two rounded partials and
    # rounds again; the weight gradient averages rounded partials. Where either cancels to
    # near zero, two kernels differ by a bf16 ulp of an addend of unit scale (up to 2^-5 in
    # [4, 8)), which atol covers. A missing TP partial or FSDP contribution moves an
    # element by ~1/sqrt(2) or ~1/sqrt(W/2) of unit scale.
    tolerances={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2**-5, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"m": 12, "k": 16, "n": 24}),
        Case("dev-bf16", "bfloat16", {"m": 64, "k": 48, "n": 64}),
    ),
    eval_cases=(
        # Per rank: three [4096 x 4096 x 4096] GEMMs (412 GFLOP).
        Case("demo-4k", "bfloat16", {"m": 4096, "k": 4096, "n": 8192}),
        Case("demo-8k", "bfloat16", {"m": 2048, "k": 8192, "n": 8192}),
    ),
)
