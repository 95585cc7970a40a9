"""Triton kernels over symmetric memory, shared by this bundle's solutions.

Each rank's symmetric buffer is reachable from every GPU; `ptrs` holds the W buffer
addresses (one int64 per rank), so a kernel reads a peer's data with an ordinary load
that travels over NVLink. The solutions copy their input into the buffer, meet at a
barrier, run one of these kernels, and meet again so that nobody overwrites a buffer a
peer is still reading.
"""

import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _peer(ptrs, peer, like):
    return tl.load(ptrs + peer).to(tl.pointer_type(like.dtype.element_ty))


@triton.jit
def copy_from_peers(
    ptrs, out, chunk, total, src_base, src_stride, WORLD: tl.constexpr, BLOCK: tl.constexpr
):
    """out[p*chunk + i] = buffer_p[src_base + p*src_stride + i], for each peer p (axis 1)."""
    peer = tl.program_id(1)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    dst = peer * chunk + offs
    mask = (offs < chunk) & (dst < total)
    src = _peer(ptrs, peer, out)
    values = tl.load(src + src_base + peer * src_stride + offs, mask=mask)
    tl.store(out + dst, values, mask=mask)


@triton.jit
def sum_from_peers(ptrs, out, n, src_base, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = sum over p of buffer_p[src_base + i], added in float32 in rank order."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for peer in tl.static_range(WORLD):
        src = _peer(ptrs, peer, out)
        acc += tl.load(src + src_base + offs, mask=mask).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


def grid(n: int, peers: int = 1) -> tuple[int, int]:
    return (triton.cdiv(max(n, 1), BLOCK), peers)
