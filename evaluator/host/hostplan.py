"""Several workers on one big host: each pinned to its own GPUs, user and scratch folder.

An 8-GPU host can serve several hardware profiles at once, e.g. four h200x2 workers or
two h200x4 ones. Each worker sees only its GPUs (CUDA_VISIBLE_DEVICES; ranks inherit it,
since the sandbox keeps CUDA_* variables), runs bundle code as a candidate user of its own
(two workers sharing one could read and signal each other's candidates: docs/security.md)
and has its own scratch folder. This module plans that and writes one environment file per
worker for the systemd template deploy/systemd/pkb-worker@.service:

    python -m evaluator.host.hostplan --gpus 8 h200x2 h200x2 h200x4 --out /etc/pkb/workers

Blocks of GPUs are contiguous, so a worker's GPUs sit on one CPU socket where the board
splits them that way; every pair of GPUs on an NVSwitch board has the same link.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator.host.cgroups import EVALUATION_MEMORY_SHARE, host_memory_mb
from evaluator.host.profiles import get_profile

DEFAULT_SCRATCH_ROOT = Path("/var/lib/pkb/scratch")
DEFAULT_USER_PREFIX = "pkb-cand"


class PlanError(ValueError):
    """The workers asked for do not fit on the host."""


@dataclass(frozen=True)
class WorkerSlot:
    name: str
    profile: str
    devices: tuple[int, ...]  # empty for CPU profiles: no GPU at all
    candidate_user: str
    scratch_dir: Path
    memory_mb: int = 0  # the evaluation's memory cap: its GPUs' share of the host's

    def env(self) -> dict[str, str]:
        """What evaluator.host.settings reads for this worker (besides the host's shared file)."""
        env = {
            "PKB_PROFILE": self.profile,
            "PKB_WORKER_NAME": self.name,
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, self.devices)),
            "PKB_CANDIDATE_USER": self.candidate_user,
            "PKB_SCRATCH_DIR": str(self.scratch_dir),
        }
        if self.memory_mb:
            env["PKB_EVALUATION_MEMORY_MB"] = str(self.memory_mb)
        return env


def plan_host(
    profiles: Sequence[str],
    *,
    gpus: Sequence[int],
    scratch_root: Path = DEFAULT_SCRATCH_ROOT,
    user_prefix: str = DEFAULT_USER_PREFIX,
    memory_mb: int | None = None,
) -> list[WorkerSlot]:
    """One slot per profile, in order, each with the next free block of `gpus` and, for a
    GPU worker, that block's share of the evaluations' memory (settings'
    EVALUATION_MEMORY_SHARE of `memory_mb`, the host's by default)."""
    usable = int((host_memory_mb() if memory_mb is None else memory_mb) * EVALUATION_MEMORY_SHARE)
    if len(set(gpus)) != len(gpus):
        raise PlanError(f"GPU ids repeat: {list(gpus)}")
    free = list(gpus)
    slots = []
    for index, name in enumerate(profiles):
        try:
            profile = get_profile(name)
        except KeyError as exc:
            raise PlanError(exc.args[0]) from None
        count = profile.world_size if profile.backend == "nccl" else 0
        if count > len(free):
            needed = sum(
                get_profile(p).world_size for p in profiles if get_profile(p).backend == "nccl"
            )
            raise PlanError(f"{', '.join(profiles)} need {needed} GPUs; the host has {len(gpus)}")
        devices, free = tuple(free[:count]), free[count:]
        worker = f"{profile.name}-{index}"
        slots.append(
            WorkerSlot(
                name=worker,
                profile=profile.name,
                devices=devices,
                candidate_user=f"{user_prefix}-{index}",
                scratch_dir=scratch_root / worker,
                memory_mb=usable * len(devices) // max(1, len(gpus)),
            )
        )
    return slots


def visible_devices(env: Mapping[str, str]) -> list[str] | None:
    """The GPUs CUDA_VISIBLE_DEVICES leaves this process (None: unset, all of them)."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [d.strip() for d in raw.split(",") if d.strip()]


def env_file(slot: WorkerSlot) -> str:
    lines = [f"# Worker {slot.name}: written by python -m evaluator.host.hostplan"]
    lines += [f"{key}={value}" for key, value in slot.env().items()]
    return "\n".join(lines) + "\n"


def write_env_files(slots: Sequence[WorkerSlot], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for slot in slots:
        path = out / f"{slot.name}.env"
        path.write_text(env_file(slot))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.host.hostplan", description=__doc__)
    parser.add_argument("profiles", nargs="+", help="one hardware profile per worker")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs on this host")
    parser.add_argument("--scratch-root", type=Path, default=DEFAULT_SCRATCH_ROOT)
    parser.add_argument("--user-prefix", default=DEFAULT_USER_PREFIX)
    parser.add_argument("--out", type=Path, help="write <worker>.env files here")
    args = parser.parse_args(argv)
    try:
        slots = plan_host(
            args.profiles,
            gpus=range(args.gpus),
            scratch_root=args.scratch_root,
            user_prefix=args.user_prefix,
        )
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for slot in slots:
        gpus = ",".join(map(str, slot.devices)) or "none"
        print(
            f"{slot.name}: GPUs {gpus}, user {slot.candidate_user}, scratch {slot.scratch_dir}, "
            f"memory {slot.memory_mb or 'the default'} MB"
        )
    if args.out:
        for path in write_env_files(slots, args.out):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
