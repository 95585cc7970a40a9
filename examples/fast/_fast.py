"""Collectives as single persistent Triton kernels over symmetric memory.

Every kernel copies this rank's input into (or pushes it straight to) symmetric buffers,
meets the peers at a barrier inside the kernel (evaluator.runtime_triton.block_barrier,
over the signal pads), and reads or combines the peers' data, all in one launch. A kernel
is a plain function of a `Team`: the table of every rank's buffer, the table of every
rank's signal pad, this rank, and where this call's half of the buffer starts, so
tests/gpu/test_fast_kernels.py runs W ranks on one GPU with ordinary buffers.

Double buffering, instead of a barrier at the end of every kernel: call k of a buffer
uses half k % 2 of it. A rank writes anything of call k (its own half, or a peer's) only
after its call k-1 kernel has finished, stream order, and so after that kernel's entry
barrier, which no rank passes before every rank has started call k-1, that is, before
every rank's call k-2 kernel, the last to read half k % 2, has finished. The reads of call
k-1 are in the other half. So nobody overwrites data a peer may still be reading, and a
call costs one barrier (two for the two-shot kernels), not three.

Block b handles the same elements in every phase and on every rank (grid-stride loops of
one size), which is what the blockwise barrier needs: block b of a peer has written what
block b here is about to read. Grids are small (`blocks`, at most MAX_BLOCKS) so every
block is resident at once, which the spin waits need.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from evaluator.runtime import symm_buffer
from evaluator.runtime_triton import block_barrier, peer_ptr

BLOCK = 4096  # elements per block per step: 16 per thread at 8 warps, four 16-byte loads
WARPS = 8
MAX_BLOCKS = 32
# One-shot all-reduce reads (W-1)·n from the peers, two-shot 2(W-1)/W·n plus a second
# barrier: the same at W = 2, so two-shot only pays from W = 3 on, and only once the
# bytes outweigh a barrier's microseconds (the size vLLM's custom all-reduce switches at).
TWO_SHOT_BYTES = 512 * 1024
ALIGN = 16  # elements: slices start on 16-element boundaries, so their loads vectorise
ROOM_STEP = 1 << 20  # buffers grow in steps of this many elements, not per byte


@dataclass(frozen=True)
class Team:
    """Where one call's kernels meet: every rank's buffer and signal pad, by rank."""

    bufs: torch.Tensor  # int64: every rank's buffer address
    pads: torch.Tensor  # int64: every rank's signal pad address
    rank: int
    world: int
    own: torch.Tensor  # this rank's whole buffer (both halves)
    base: int  # first element of this call's half
    pad_slots: int  # int32 slots in each pad

    @property
    def room(self) -> int:
        return self.own.numel() // 2

    def stage(self, numel: int) -> torch.Tensor:
        """This call's half of the own buffer: a torch op may write its output here, and
        a kernel given this tensor as input skips the copy in."""
        assert numel <= self.room, (numel, self.room)
        return self.own[self.base : self.base + numel]


def team(name: str, numel: int, dtype: torch.dtype) -> Team:
    """This call's Team over symmetric buffer `name`, with room for `numel` elements."""
    room = triton.cdiv(numel + 8 * ALIGN, ROOM_STEP) * ROOM_STEP  # slack for aligned slices
    buf = symm_buffer(name, 2 * room, dtype)
    # The whole allocation, not the view of this request: halves must not move when a
    # smaller call follows a larger one, or call k+1 could overlap call k's half.
    own = buf.tensor.as_strided((2 * (buf.capacity // 2),), (1,), 0)
    base = (buf.next_epoch() % 2) * (own.numel() // 2)
    pad_slots = buf.pad_bytes // 4
    return Team(buf.ptrs, buf.pads, buf.rank, buf.world_size, own, base, pad_slots)


def grid(team: Team, elements: int, phases: int, blocks: int) -> tuple[int]:
    """Blocks for `elements` per block-step: no more than the work or the pads allow."""
    fit = team.pad_slots // (phases * team.world)
    return (max(1, min(blocks, fit, triton.cdiv(elements, BLOCK))),)


def _aligned_slice(n: int, world: int) -> int:
    return triton.cdiv(triton.cdiv(n, world), ALIGN) * ALIGN


# --- all-reduce, reduce, broadcast ---------------------------------------------------


def combine(
    x: torch.Tensor,
    team: Team,
    *,
    src: int = -1,
    dst: int = -1,
    bias: torch.Tensor | None = None,
    blocks: int = MAX_BLOCKS,
) -> torch.Tensor:
    """All-reduce (src = dst = -1), reduce to rank dst, or broadcast from rank src.

    Sums run in float32 in rank order 0..W-1 on whichever rank computes them, so every
    rank gets bit-identical results. `bias` (length dividing x's) is added to the float32
    sum before the one rounding. Returns a new tensor like x (unwritten on a rank other
    than dst). If x is `team.stage(x.numel())`, the data is already in place.
    """
    n = x.numel()
    out = torch.empty_like(x)
    if n == 0:
        return out
    staged = x.data_ptr() == team.stage(n).data_ptr()
    bias_arg = bias if bias is not None else x
    ncols = bias.numel() if bias is not None else 1
    meta = dict(COPY_IN=not staged, HAS_BIAS=bias is not None, WORLD=team.world, BLOCK=BLOCK)
    args = (x, out, bias_arg, team.bufs, team.pads, team.rank, src, dst, team.base)
    if team.world > 2 and n * x.element_size() > TWO_SHOT_BYTES:
        chunk = _aligned_slice(n, team.world)
        assert team.world * chunk <= team.room
        two_shot_kernel[grid(team, chunk, 2, blocks)](
            *args, n, chunk, ncols, num_warps=WARPS, **meta
        )
    else:
        one_shot_kernel[grid(team, n, 1, blocks)](*args, n, ncols, num_warps=WARPS, **meta)
    return out


@triton.jit
def _gather_value(bufs, base, offs, mask, src, like, WORLD: tl.constexpr):
    """float32 values at `base + offs`: rank src's, or with src < 0 every rank's sum."""
    if src >= 0:
        acc = tl.load(peer_ptr(bufs, src, like) + base + offs, mask=mask).to(tl.float32)
    else:
        acc = tl.load(peer_ptr(bufs, 0, like) + base + offs, mask=mask).to(tl.float32)
        for peer in tl.static_range(1, WORLD):
            acc += tl.load(peer_ptr(bufs, peer, like) + base + offs, mask=mask).to(tl.float32)
    return acc


@triton.jit
def _copy_in(x, own, start, n, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(own + offs, tl.load(x + offs, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["rank", "src", "dst"])
def one_shot_kernel(
    x,
    out,
    bias,
    bufs,
    pads,
    rank,
    src,
    dst,
    base,
    n,
    ncols,
    COPY_IN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    WORLD: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Every reader combines the whole vector from every rank's buffer: one barrier."""
    pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
    own = peer_ptr(bufs, rank, out) + base
    if COPY_IN:
        if src < 0 or src == rank:
            for start in range(pid * BLOCK, n, step):
                _copy_in(x, own, start, n, BLOCK)
    block_barrier(pads, rank, pid, WORLD)
    if dst < 0 or dst == rank:
        for start in range(pid * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            acc = _gather_value(bufs, base, offs, mask, src, out, WORLD)
            if HAS_BIAS:
                acc += tl.load(bias + offs % ncols, mask=mask).to(tl.float32)
            tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["rank", "src", "dst"])
def two_shot_kernel(
    x,
    out,
    bias,
    bufs,
    pads,
    rank,
    src,
    dst,
    base,
    n,
    chunk,
    ncols,
    COPY_IN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    WORLD: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Rank r combines slice r from every rank into its own buffer (reduce-scatter, or
    scatter from src), then every reader copies the other slices from their owners."""
    pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
    own = peer_ptr(bufs, rank, out) + base
    if COPY_IN:
        if src < 0 or src == rank:
            for start in range(pid * BLOCK, chunk, step):
                for peer in tl.static_range(WORLD):
                    offs = peer * chunk + start + tl.arange(0, BLOCK)
                    mask = (start + tl.arange(0, BLOCK) < chunk) & (offs < n)
                    tl.store(own + offs, tl.load(x + offs, mask=mask), mask=mask)
    block_barrier(pads, rank, pid, WORLD)
    keep = dst < 0 or dst == rank
    for start in range(pid * BLOCK, chunk, step):
        offs = rank * chunk + start + tl.arange(0, BLOCK)
        mask = (start + tl.arange(0, BLOCK) < chunk) & (offs < n)
        acc = _gather_value(bufs, base, offs, mask, src, out, WORLD)
        if HAS_BIAS:
            acc += tl.load(bias + offs % ncols, mask=mask).to(tl.float32)
        value = acc.to(out.dtype.element_ty)
        # Slice `rank` of our own buffer is read by nobody else in this phase.
        tl.store(own + offs, value, mask=mask)
        if keep:
            tl.store(out + offs, value, mask=mask)
    block_barrier(pads, rank, tl.num_programs(0) + pid, WORLD)
    if keep:
        for start in range(pid * BLOCK, chunk, step):
            for peer in tl.static_range(WORLD):
                if peer != rank:
                    offs = peer * chunk + start + tl.arange(0, BLOCK)
                    mask = (start + tl.arange(0, BLOCK) < chunk) & (offs < n)
                    theirs = peer_ptr(bufs, peer, out) + base
                    tl.store(out + offs, tl.load(theirs + offs, mask=mask), mask=mask)


# --- all-gather, gather ----------------------------------------------------------------


def gather(x: torch.Tensor, team: Team, *, dst: int = -1, blocks: int = MAX_BLOCKS):
    """All ranks' x concatenated in rank order, on every rank (dst = -1) or on rank dst
    (the others get an unwritten tensor of the same size)."""
    n = x.numel()
    out = x.new_empty(team.world * n)
    if n == 0:
        return out
    gather_kernel[grid(team, n, 1, blocks)](
        x, out, team.bufs, team.pads, team.rank, dst, team.base, n,
        WORLD=team.world, BLOCK=BLOCK, num_warps=WARPS,
    )  # fmt: skip
    return out


@triton.jit(do_not_specialize=["rank", "dst"])
def gather_kernel(x, out, bufs, pads, rank, dst, base, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
    own = peer_ptr(bufs, rank, out) + base
    for start in range(pid * BLOCK, n, step):
        _copy_in(x, own, start, n, BLOCK)
    block_barrier(pads, rank, pid, WORLD)
    if dst < 0 or dst == rank:
        for start in range(pid * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            for peer in tl.static_range(WORLD):
                theirs = peer_ptr(bufs, peer, out) + base
                tl.store(out + peer * n + offs, tl.load(theirs + offs, mask=mask), mask=mask)


# --- all-to-all, reduce-scatter, scatter --------------------------------------------------


def exchange(x: torch.Tensor, team: Team, *, reduce: bool, blocks: int = MAX_BLOCKS):
    """x is W chunks; chunk p goes to rank p. All-to-all (chunk p of the result is rank
    p's chunk r) or, with `reduce`, reduce-scatter (the float32 sum of every rank's chunk
    r, in rank order)."""
    n = x.numel() // team.world
    out = x.new_empty(n if reduce else team.world * n)
    if n == 0:
        return out
    exchange_kernel[grid(team, n, 1, blocks)](
        x, out, team.bufs, team.pads, team.rank, team.base, n,
        REDUCE=reduce, WORLD=team.world, BLOCK=BLOCK, num_warps=WARPS,
    )  # fmt: skip
    return out


@triton.jit(do_not_specialize=["rank"])
def exchange_kernel(
    x, out, bufs, pads, rank, base, n, REDUCE: tl.constexpr, WORLD: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    # Push, not pull: writes over NVLink are posted and outrun reads (388 vs 369 GB/s in
    # docs/architecture.md, "Facts measured on the hardware"), and no local copy in is
    # needed. Rank r's chunk p lands in slot r of rank p's buffer.
    pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        for peer in tl.static_range(WORLD):
            theirs = peer_ptr(bufs, peer, out) + base + rank * n
            tl.store(theirs + offs, tl.load(x + peer * n + offs, mask=mask), mask=mask)
    block_barrier(pads, rank, pid, WORLD)
    own = peer_ptr(bufs, rank, out) + base
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        if REDUCE:
            acc = tl.load(own + offs, mask=mask).to(tl.float32)
            for peer in tl.static_range(1, WORLD):
                acc += tl.load(own + peer * n + offs, mask=mask).to(tl.float32)
            tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)
        else:
            for peer in tl.static_range(WORLD):
                tl.store(
                    out + peer * n + offs, tl.load(own + peer * n + offs, mask=mask), mask=mask
                )


def scatter(x: torch.Tensor, team: Team, *, src: int, blocks: int = MAX_BLOCKS):
    """Chunk r of rank src's x (W chunks), on every rank r."""
    n = x.numel() // team.world
    out = x.new_empty(n)
    if n == 0:
        return out
    scatter_kernel[grid(team, n, 1, blocks)](
        x, out, team.bufs, team.pads, team.rank, src, team.base, n,
        WORLD=team.world, BLOCK=BLOCK, num_warps=WARPS,
    )  # fmt: skip
    return out


@triton.jit(do_not_specialize=["rank", "src"])
def scatter_kernel(
    x, out, bufs, pads, rank, src, base, n, WORLD: tl.constexpr, BLOCK: tl.constexpr
):
    # Pull: the root only copies in; the W-1 others read their chunks in parallel.
    pid, step = tl.program_id(0), tl.num_programs(0) * BLOCK
    if rank == src:
        own = peer_ptr(bufs, rank, out) + base
        for start in range(pid * BLOCK, n, step):
            for peer in tl.static_range(WORLD):
                _copy_in(x + peer * n, own + peer * n, start, n, BLOCK)
    block_barrier(pads, rank, pid, WORLD)
    root = peer_ptr(bufs, src, out) + base + rank * n
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(root + offs, mask=mask), mask=mask)


# --- local math for the vocab-parallel loss ------------------------------------------------


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """float32 log-sum-exp of each row of a 2-D tensor, reading it once in its dtype."""
    rows, cols = x.shape
    out = torch.empty(rows, dtype=torch.float32, device=x.device)
    if rows:
        row_logsumexp_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=2048, num_warps=8)
    return out


@triton.jit
def row_logsumexp_kernel(x, out, cols, stride, BLOCK: tl.constexpr):
    # Online: a running maximum per lane and the sum of exp(v - max) rescaled as it rises.
    # Lanes that have seen only -inf (masked tails) keep sum 0 instead of exp(nan).
    row = x + tl.program_id(0).to(tl.int64) * stride
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(row + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        new = tl.maximum(best, v)
        finite = new != float("-inf")
        total = tl.where(finite, total * tl.exp(best - new) + tl.exp(v - new), 0.0)
        best = new
    top = tl.max(best, axis=0)
    total = tl.where(best != float("-inf"), total * tl.exp(best - top), 0.0)
    tl.store(out + tl.program_id(0), top + tl.log(tl.sum(total, axis=0)))
