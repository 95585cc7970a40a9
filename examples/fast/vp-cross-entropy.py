import torch
from _fast import gather, row_logsumexp, team


def solution(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    # Each rank's share of a token's loss is two float32 numbers: its shard's
    # log-sum-exp and its target logit (zero unless it owns the label). One all-gather
    # of those 2·T numbers replaces the reference's three all-reduces, and the shard is
    # read once, in its own dtype.
    rank, shard = torch.distributed.get_rank(), logits.shape[1]
    local = labels - rank * shard
    owned = (local >= 0) & (local < shard)
    target = logits.gather(1, local.clamp(0, shard - 1)[:, None])[:, 0].float() * owned
    mine = torch.stack((row_logsumexp(logits), target))
    group = team("vp-cross-entropy", mine.numel(), torch.float32)
    every = gather(mine.view(-1), group).view(group.world, 2, -1)
    return torch.logsumexp(every[:, 0], dim=0) - every[:, 1].sum(dim=0)
