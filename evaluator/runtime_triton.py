"""Triton device functions for kernels over symmetric memory (GPU hosts only: imports triton).

    from evaluator.runtime_triton import block_barrier, peer_ptr

Both take tables of addresses, one int64 per rank: `SymmBuffer.ptrs` (the buffers) and
`SymmBuffer.pads` (the signal pads) from `evaluator.runtime.symm_buffer`. Kernels written
over these tables are plain functions of them, so a test can run W "ranks" on one GPU
with ordinary buffers and zeroed int32 pads in their place (tests/gpu/test_fast_kernels.py).

`block_barrier(pads, rank, slot, WORLD)`: block b of this rank meets the block with the
same `slot` on every other rank. Writes a block made before it are visible to the peers'
matching blocks after it; nothing is said about other blocks, so a kernel must give block
b the same share of the data on every rank (grid-stride loops over the same sizes do).
Every block that calls it must be resident at once on every rank (a persistent grid of a
few blocks), or the spin waits forever. It uses `pad_bytes // 4 // WORLD` distinct slots;
two barriers in one kernel take different slots (e.g. `pid` and `num_programs + pid`).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def peer_ptr(table, rank, like):
    """Rank `rank`'s address from an int64 table, as a pointer of `like`'s element type.

    The 16-byte alignment hint lets loads from it vectorise: symmetric allocations (and
    CUDA allocations in general) start on far larger boundaries.
    """
    # On the pointer, not the integer: the alignment analysis does not see through the
    # int-to-pointer cast (a hint on the loaded integer left the loads scalar).
    pointer = tl.load(table + rank).to(tl.pointer_type(like.dtype.element_ty))
    return tl.multiple_of(pointer, 16)


@triton.jit
def block_barrier(pads, rank, slot, WORLD: tl.constexpr):
    """Signal slot [slot, rank] of every rank's pad, then wait for [slot, p] of each p in ours.

    A signal is a compare-and-swap 0 -> 1 and a wait one of 1 -> 0, so every slot is back
    to zero once both sides have passed, and a signal sent while the previous one on that
    slot is still unconsumed waits for it instead of being lost. Scalar atomics run on one
    thread of the block: the debug_barrier before makes every thread's earlier writes
    happen before the release (which, at system scope, carries them to the peers), and
    the one after keeps every thread's later reads after the acquire.
    """
    tl.debug_barrier()
    for peer in tl.static_range(WORLD):
        flag = tl.load(pads + peer).to(tl.pointer_type(tl.int32)) + slot * WORLD + rank
        seen = tl.atomic_cas(flag, 0, 1, sem="release", scope="sys")
        while seen != 0:
            seen = tl.atomic_cas(flag, 0, 1, sem="release", scope="sys")
    own = tl.load(pads + rank).to(tl.pointer_type(tl.int32)) + slot * WORLD
    for peer in tl.static_range(WORLD):
        seen = tl.atomic_cas(own + peer, 1, 0, sem="acquire", scope="sys")
        while seen != 1:
            seen = tl.atomic_cas(own + peer, 1, 0, sem="acquire", scope="sys")
    tl.debug_barrier()
