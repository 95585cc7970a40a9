"""Folders for evaluations in tests that bundle code (the candidate user) must reach."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluator.host import bubblewrap, cgroups, proctree
from evaluator.host.settings import load_settings
from evaluator.judge.processes import pid_running


@contextmanager
def reachable_folder(name: str, *, candidates_write: bool = False) -> Iterator[Path]:
    """A fresh folder under the temporary folder that the candidate user may pass through
    (and, with `candidates_write`, owns), removed afterwards. Bundle code in bubblewrap's
    sandbox sees it only where the evaluation's settings share it (`sandbox_shared`,
    PKB_SANDBOX_SHARED).

    Not pytest's tmp_path: pytest makes /tmp/pytest-of-<user> 0700 again whenever any
    pytest session starts, which would cut bundle code (nobody, when the tests run as
    root) off from a folder below it in the middle of a run."""
    folder = Path(tempfile.mkdtemp(prefix=f"pkb-test-{name}-"))
    # Writable by all (sticky) rather than the candidate user's: a folder of that user's
    # in /tmp is litter to any evaluation that began before it was made
    # (host/cleanup.py, `remove_litter`), and was removed under a test mid-run.
    folder.chmod(0o1777 if candidates_write else 0o711)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sandboxed() -> bool:
    """Whether bundle code runs in bubblewrap's sandbox here, so that the pids it notes are
    its pid namespace's, not the host's (evaluator/host/bubblewrap.py)."""
    return load_settings({}).sandbox == "bubblewrap" and bubblewrap.bwrap_binary() is not None


@contextmanager
def host_freezers(name: str) -> Iterator[cgroups.Freezers | None]:
    """Freezers for one rank of each runner on this machine's own hierarchy (under a
    memory cgroup where it gives one, as an evaluation's are), removed afterwards; None
    where the host gives none (it needs root, and cgroup v1's freezer or v2's memory
    controller)."""
    memory = None
    with contextlib.suppress(cgroups.CgroupError):
        memory = cgroups.EvaluationCgroup.create(name, 1 << 30)
    try:
        try:
            freezers = cgroups.Freezers.create(name, 1, memory)
        except cgroups.CgroupError:
            yield None
            return
        try:
            yield freezers
        finally:
            freezers.close()
    finally:
        if memory is not None:
            memory.close()


def freezes_here() -> bool:
    """Whether an evaluation here gets a freezer cgroup per runner's rank
    (host/cgroups.py, `Freezers`)."""
    with host_freezers(f"pkb-test-probe-{os.getpid()}") as freezers:
        return freezers is not None


def noted_pid_running(pid: int, namespace: str | None = None) -> bool:
    """Whether the process that bundle code noted as `pid` still runs: inside a sandbox, a
    host process whose innermost pid it is (in `namespace`, its /proc/self/ns/pid, where
    the note says); else the host's own pid."""
    if not sandboxed():
        return pid_running(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            inner = proctree.nspid(int(entry.name))
            if len(inner) > 1 and inner[-1] == pid and _in(entry, namespace):
                return True
    return False


def _in(process: Path, namespace: str | None) -> bool:
    if namespace is None:
        return True
    try:
        return os.readlink(process / "ns" / "pid") == namespace
    except OSError:
        return False
