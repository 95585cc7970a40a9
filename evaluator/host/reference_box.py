"""The reference's runner in a bubblewrap sandbox of its own, started as the candidate's is.

Nothing here confines trusted code for safety's sake: the reference's runner is started the
way the candidate's is (the same launcher, namespaces, seccomp filter from the first
instruction, user and limits) so that what a start costs a process is paid by both sides of
a speedup. Started plainly as the worker's user, the same code read 0.970-0.978 against
itself at 64K on one H100, run after run; in two interleaved comparisons, readings within
2% of 1.00 went from 60% to 81% started alike
(docs/measurements/2026-11-26-runners-alike.md).

The reference's runner then runs as the candidate user too, so bundle code must not reach
it: its pid, network and IPC namespaces are not the candidate's (no signal, trace or socket
finds it), and its folder is a sibling of the evaluation's scratch folder, never inside it
(the candidate's sandbox binds that one read-write; it sees the rest of the host read-only,
and its /tmp is its own). The runner declares itself not dumpable as every trusted rank
does. No memory cgroup: the evaluation's cap is the candidate's alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from evaluator.host import bubblewrap
from evaluator.host.rlimits import Limits
from evaluator.host.sandbox import candidate_ids
from evaluator.host.settings import Settings
from evaluator.rank_process import RankSetup

log = logging.getLogger(__name__)


@dataclass
class ReferenceBox:
    box: bubblewrap.Sandbox
    folder: Path  # root's: the launcher, and the runner's folder
    scratch: Path  # the runner's own, as the candidate user: home, tmp, rendezvous
    limits: Limits | None  # the candidate's, without the CPU cap (trusted code)

    @property
    def executable(self) -> str:
        return self.box.executable

    @property
    def holder(self) -> int:
        return self.box.holder.pid

    def setup(self, setup: RankSetup, generation: int) -> RankSetup:
        """A reference runner's setup for this sandbox: its rendezvous and caches in its
        own folder, the candidate's limits, and no filter of its own (the launcher's)."""
        return dataclasses.replace(
            setup,
            rendezvous=str(self.scratch / f"rendezvous-reference-{generation}"),
            env={"HOME": str(self.scratch / "home"), "TMPDIR": str(self.scratch / "tmp")},
            limits=self.limits,
            seccomp=False,
        )

    def close(self, *, remove: bool = True) -> None:
        self.box.close()
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)


# Backends whose reference runners start in a sandbox of their own (CPU hosts fork them).
SANDBOXED_BACKENDS = frozenset({"nccl"})


def for_evaluation(
    scratch: Path, jail: object, backend: str, settings: Settings
) -> ReferenceBox | None:
    """Where bundle code runs in bubblewrap (`jail`) on GPUs, the sandbox of the
    reference's runners of the evaluation whose scratch folder is `scratch`."""
    if not isinstance(jail, bubblewrap.Sandbox) or backend not in SANDBOXED_BACKENDS:
        return None
    return start(scratch, *candidate_ids(settings.candidate_user), settings.limits)


def start(scratch: Path, uid: int, gid: int, limits: Limits | None) -> ReferenceBox | None:
    """The sandbox for the reference's runners of the evaluation whose scratch folder is
    `scratch`, as `uid`:`gid`; None (the runners start plainly, filtered) where it cannot
    start, which costs the host its symmetry, not an evaluation."""
    folder = scratch.parent / f"{scratch.name}-reference"
    runner = folder / "runner"
    try:
        folder.mkdir(mode=0o711)
    except OSError as exc:
        log.warning("the reference's runner starts outside a sandbox of its own: %s", exc)
        return None
    try:
        folder.chmod(0o711)  # whatever the umask: the candidate user passes through
        for path in (runner, runner / "home", runner / "tmp"):
            path.mkdir(mode=0o700)
            os.chown(path, uid, gid)
        box = bubblewrap.Sandbox.start(folder / "launcher", runner, uid, gid)
    except (OSError, RuntimeError) as exc:
        log.warning("the reference's runner starts outside a sandbox of its own: %s", exc)
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
        return None
    trusted = dataclasses.replace(limits, cpu_s=0) if limits is not None else None
    return ReferenceBox(box, folder, runner, trusted)
