from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance


def solution(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    halo = weight.shape[1] - 1
    # The first token needs the K-1 tokens before it: the tail of the previous rank's
    # shard, or zeros at the start of the sequence.
    before = x.new_zeros(halo, x.shape[1])
    ops = []
    if rank + 1 < world_size:
        ops.append(dist.P2POp(dist.isend, x[-halo:].contiguous(), rank + 1))
    if rank > 0:
        ops.append(dist.P2POp(dist.irecv, before, rank - 1))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    padded = torch.cat([before, x]).float().T[None]  # [1, C, K-1 + T/W]
    y = F.conv1d(padded, weight.float()[:, None, :], groups=x.shape[1])
    return y[0].T.to(x.dtype)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    rows = case.params["seq"] // ctx.world_size
    channels, width = case.params["channels"], case.params["width"]
    return {
        "x": ctx.randn(rows, channels),
        "weight": ctx.randn(channels, width, shared=True),
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Every rank but the last sends its last K-1 tokens to the next rank.
    p = case.params
    return (p["width"] - 1) * p["channels"] * case.itemsize


PROBLEM = Problem(
    slug="cp-halo-conv1d",
    title="Causal depthwise conv1d with halo exchange",
    category=Category.CONTEXT,
    description=(
        "A causal depthwise 1-D convolution (the short convolution of Mamba-style and "
        "gated linear-attention blocks) over a sequence of `T` tokens split contiguously "
        "across W ranks. Rank r holds `x` `[T/W, C]`, its tokens "
        "`[r·T/W, (r+1)·T/W)`, and the shared `weight` `[C, K]` (K small, e.g. 4). It "
        "returns `y` `[T/W, C]` in `x`'s dtype with "
        "`y[t, c] = Σ_j weight[c, j] · x[t − (K−1) + j, c]` over global positions, where "
        "positions before 0 are zeros.\n\n"
        "Only the first K-1 outputs of a shard reach into the previous rank, so each rank "
        "but the last sends its last K-1 tokens (`(K−1)·C` elements) to rank r+1 "
        "(`batch_isend_irecv`), rank 0 pads with zeros, and the convolution runs locally "
        "in float32. The message is tiny: this problem is about latency, so a kernel can "
        "write the halo straight into the next rank's symmetric buffer and start on the "
        "interior tokens, which need nothing from anyone, while it travels."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # K products summed in float32: ~1e-7 relative. The bf16 output's rounding is 2^-9
    # relative on values of O(1); a missing halo term is off by O(1).
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    dev_cases=(
        Case("dev-fp32", "float32", {"seq": 64, "channels": 16, "width": 4}),
        Case("dev-bf16", "bfloat16", {"seq": 256, "channels": 64, "width": 4}),
    ),
    eval_cases=(
        Case("demo-32k", "bfloat16", {"seq": 32768, "channels": 4096, "width": 4}),
        Case("demo-128k", "bfloat16", {"seq": 131072, "channels": 2048, "width": 4}),
    ),
)
