"""Process grids, neighbour swaps and block transposes shared by the geometric problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def grid_shape(world_size: int) -> tuple[int, int]:
    """(rows, cols) of a 2-D process grid of W ranks: 2 -> 2x1, 4 -> 2x2, 8 -> 4x2.

    The columns are the largest power of two whose square is at most W; ranks fill the
    grid row-major (rank = row·cols + col).
    """
    cols = 1 << ((world_size.bit_length() - 1) // 2)
    return world_size // cols, cols


def swap(sends: list[tuple[torch.Tensor, int | None]]) -> list[torch.Tensor]:
    """Send every tensor to its peer and receive one of the same shape from that peer.

    A peer of None is the domain's edge: nothing travels and the received tensor is zeros
    (a Dirichlet boundary). All messages go in one batch, so they travel together.
    """
    ops, received = [], []
    for tensor, peer in sends:
        buffer = torch.zeros_like(tensor)
        if peer is not None:
            ops.append(dist.P2POp(dist.isend, tensor.contiguous(), peer))
            ops.append(dist.P2POp(dist.irecv, buffer, peer))
        received.append(buffer)
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()
    return received


def transpose_blocks(y: torch.Tensor) -> torch.Tensor:
    """The slab transpose of a distributed 2-D FFT: `[R, W·B]` rows -> `[B, W·R]`.

    Every rank holds R consecutive rows; rank r gets column block r (B columns) of every
    rank's rows, transposed: rank s's rows land at columns `[s·R, (s+1)·R)`.
    One all-to-all; each peer's block is transposed before it travels.
    """
    world_size = dist.get_world_size()
    rows, cols = y.shape
    block = cols // world_size
    send = y.reshape(rows, world_size, block).permute(1, 2, 0).contiguous()  # [W, B, R]
    recv = torch.empty_like(send)
    # Complex tensors travel as their (re, im) float pairs.
    dist.all_to_all_single(torch.view_as_real(recv), torch.view_as_real(send))
    return recv.permute(1, 0, 2).reshape(block, world_size * rows)
