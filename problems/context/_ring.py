"""Building blocks of the ring-attention references: pass k/v along, attend, merge.

Blocks are [heads, s, D]; (out, lse) come back in float32. A problem's version covers
this module too (problems.spec hashes the catalog modules a problem uses).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def pass_along(kv: torch.Tensor):
    """Send kv to the next rank and receive the previous rank's into a new buffer."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(kv)
    ops = [
        dist.P2POp(dist.isend, kv, (rank + 1) % world_size),
        dist.P2POp(dist.irecv, incoming, (rank - 1) % world_size),
    ]
    return incoming, dist.batch_isend_irecv(ops)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False):
    """Attention of [heads, s, D] queries on one key block: (out, lse), both float32.

    Causal here means the block on the diagonal: query i sees keys 0..i of the block.
    """
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
        # Flash attention, the kernel production ring attention calls per block: it
        # returns the log-sum-exp that merging needs.
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(
            q[None], k[None], v[None], is_causal=causal
        )[:2]
        return out[0].float(), lse[0]
    scores = (q.float() @ k.float().transpose(1, 2)) * q.shape[-1] ** -0.5
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    lse = scores.logsumexp(-1)
    return torch.exp(scores - lse[..., None]) @ v.float(), lse


def merge(out, lse, block_out, block_lse):
    """Online softmax: combine two partial attentions by their log-sum-exps."""
    if out is None:
        return block_out, block_lse
    new_lse = torch.logaddexp(lse, block_lse)
    kept, added = (lse - new_lse).exp(), (block_lse - new_lse).exp()
    return out * kept[..., None] + block_out * added[..., None], new_lse
