"""Hardware profiles: which queue a submission goes to, and how its host runs it.

Results of different profiles are never ranked together.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.contract import Mode


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    label: str
    queue: str
    world_size: int
    backend: str  # "gloo" (CPU ranks) or "nccl" (one GPU per rank)
    # CPU hosts are for development: they run the small public dev cases, since the eval
    # shapes are sized for NVLink and would take minutes per problem over gloo.
    case_kind: str
    # What a result must have been judged in to rank (issue 50): the sandbox that ran
    # (the finished message's `environment["sandbox"]`) and whether each candidate was
    # frozen while the reference was timed (`environment["candidate_frozen"]`). The portal
    # flags a result judged with less, so that it never ranks, unless an operator names the
    # profile in PKB_RANK_WEAKER_SANDBOX (a development setting; `make run` names "cpu").
    required_sandbox: str = "bubblewrap"
    requires_frozen: bool = True

    @property
    def unranked_queue(self) -> str:
        """Where the modes that never count go (test, benchmark, profile): a worker whose
        canary reads out of bounds stops taking ranked work only (evaluator/host/canary.py),
        so it stops consuming `queue` and keeps consuming this."""
        return f"{self.queue}.unranked"

    def queue_for(self, mode: str) -> str:
        """The queue of an evaluation in `mode` (a `Mode` or its value)."""
        return self.queue if mode == Mode.RANKED else self.unranked_queue


PROFILES: dict[str, HardwareProfile] = {
    p.name: p
    for p in (
        HardwareProfile("cpu", "CPU, 4 ranks over gloo", "eval.cpu", 4, "gloo", "dev"),
        HardwareProfile("h200x2", "2x H200 (NVLink)", "gpu.h200x2", 2, "nccl", "eval"),
        HardwareProfile("h200x4", "4x H200 (NVLink)", "gpu.h200x4", 4, "nccl", "eval"),
        HardwareProfile("h200x8", "8x H200 (NVLink)", "gpu.h200x8", 8, "nccl", "eval"),
    )
}

DEFAULT_PROFILE = "cpu"


def get_profile(name: str) -> HardwareProfile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown hardware profile {name!r}; known: {known}") from None
