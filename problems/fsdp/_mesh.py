"""Process subgroups of the FSDP problems' 2-D layouts, created once per process group.

Rank r sits at (r // 2, r % 2) of a (W/2) x 2 grid. `pair_group()` is r's row, the ranks
{2k, 2k+1} (a tensor-parallel pair, an HSDP shard group, an expert-parallel pair);
`stride_group()` is r's column, the ranks of r's parity {r % 2, r % 2 + 2, ...} (an FSDP
group of a 2-D mesh, an HSDP replica group, an expert-data-parallel group). At W = 2 the
columns have one rank each.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch.distributed as dist

Layout = tuple[tuple[int, ...], ...]

# One entry per (default process group, layout): new_group is a collective call that every
# rank must make for every group, in the same order, so it is made once, not per call.
_GROUPS: dict[tuple[object, Layout], dist.ProcessGroup] = {}


def _group_of_rank(layout: Layout) -> dist.ProcessGroup:
    key = (dist.group.WORLD, layout)
    if key not in _GROUPS:
        rank, mine = dist.get_rank(), None
        for ranks in layout:
            group = dist.new_group(list(ranks))
            if rank in ranks:
                mine = group
        assert mine is not None, f"rank {rank} is in no group of {layout}"
        _GROUPS[key] = mine
    return _GROUPS[key]


def pairs(world_size: int) -> Layout:
    return tuple((k, k + 1) for k in range(0, world_size, 2))


def strides(world_size: int) -> Layout:
    return tuple(tuple(range(parity, world_size, 2)) for parity in range(2))


def pair_group() -> dist.ProcessGroup:
    """This rank's pair {2k, 2k+1}; its index in it is rank % 2."""
    return _group_of_rank(pairs(dist.get_world_size()))


def stride_group() -> dist.ProcessGroup:
    """The W/2 ranks of this rank's parity, in rank order; its index in it is rank // 2."""
    return _group_of_rank(strides(dist.get_world_size()))
