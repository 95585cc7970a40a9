"""A memory cap per evaluation: one cgroup holding every process that runs its bundle code.

RLIMIT_AS caps one process's address space (and only on CPU hosts: CUDA reserves terabytes
of it); ranks, their children and the compile pass together could still take the host's
memory. The kernel's memory controller caps their sum: past PKB_EVALUATION_MEMORY_MB its
OOM killer ends a process of the evaluation (a runtime error, "killed by SIGKILL"), never
one of the host's. The launcher of each candidate process moves itself into the cgroup
before it drops root (`bubblewrap.py enter`), so whatever it starts is charged there.

cgroup v2 (a unified hierarchy with the memory controller) or v1 (a `memory` hierarchy),
whichever holds this process. On v2 the controller is enabled for our cgroup's children,
which the kernel allows only in a cgroup without processes of its own: the worker first
moves itself into a leaf, `pkb-worker` (systemd: the unit needs `Delegate=yes`). Where
neither works (no root, a read-only cgroup file system) evaluations run without the cap,
and the worker says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CLOSE_TIMEOUT_S = 5.0
STALE_S = 3600
EVALUATION_MEMORY_SHARE = 0.75  # of the host's memory: the rest is the worker's and the OS's


def host_memory_mb(meminfo: str = "/proc/meminfo") -> int:
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class CgroupError(RuntimeError):
    pass


def _own_groups() -> dict[str, str]:
    return _parse(Path("/proc/self/cgroup"))


def _parse(table: Path) -> dict[str, str]:
    """A process's cgroup per hierarchy: "" for v2's, "memory" for v1's memory one."""
    found = {}
    for line in table.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _v2_base() -> Path | None:
    path = _own_groups().get("")
    if path is None or not (ROOT / "cgroup.controllers").is_file():
        return None
    base = ROOT / path.lstrip("/")
    return base if "memory" in (ROOT / "cgroup.controllers").read_text().split() else None


def _v1_base() -> Path | None:
    path = _own_groups().get("memory")
    mount = ROOT / "memory"
    return mount / path.lstrip("/") if path is not None and mount.is_dir() else None


def _remove_stale(base: Path) -> None:
    """Empty evaluation cgroups a killed worker left (an hour old: a live one is never
    empty that long), their runners' freezers first. rmdir refuses any with a process in
    it."""
    for group in base.glob("pkb-eval-*"):
        with contextlib.suppress(OSError):
            if time.time() - group.stat().st_mtime > STALE_S:
                for runner in RUNNERS:
                    for rank in group.glob(f"{runner}-*"):
                        rank.rmdir()
                group.rmdir()


def _enable_v2(base: Path) -> None:
    """The memory controller for `base`'s children; our processes moved to a leaf first."""
    if "memory" in (base / "cgroup.subtree_control").read_text().split():
        return
    leaf = base / "pkb-worker"
    leaf.mkdir(exist_ok=True)
    for pid in (base / "cgroup.procs").read_text().split():
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            (leaf / "cgroup.procs").write_text(pid)
    (base / "cgroup.subtree_control").write_text("+memory")


class EvaluationCgroup:
    """The cgroup of one evaluation; `procs` is the file a process writes its pid to."""

    def __init__(self, path: Path, version: int) -> None:
        self.path, self.version = path, version

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> EvaluationCgroup:
        """Raises CgroupError where this host gives no memory cgroup to make."""
        try:
            if (base := _v2_base()) is not None:
                _enable_v2(base)
                _remove_stale(base)
                group = cls(base / name, 2)
                group.path.mkdir()
                (group.path / "memory.max").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    (group.path / "memory.swap.max").write_text("0")
                return group
            if (base := _v1_base()) is not None:
                _remove_stale(base)
                group = cls(base / name, 1)
                group.path.mkdir()
                (group.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    (group.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
                return group
        except OSError as exc:
            raise CgroupError(f"no memory cgroup: {exc}") from exc
        raise CgroupError("no memory controller holds this process")

    def peak_bytes(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Removed once empty: the evaluation's processes are killed before this, and
        the kernel takes a moment to let a dying process's charge go."""
        _remove(self.path)


RUNNERS = ("reference", "candidate")
OWNER = "-worker-"  # v1: the evaluation's freezers name the worker's pid after this


class Freezers:
    """A cgroup per rank of each runner, holding every process of that rank's runner: a
    judge freezes its candidate's while the reference is timed, and its reference's while
    the candidate is (judge/processes.py, `frozen`), with no signal sent: a cgroup is a
    wall bundle code cannot leave (its user cannot write the cgroup files, and
    bubblewrap's sandbox does not show them), and unlike a SIGSTOP to the runner's
    process group, which misses what left it (setsid) and ends in a SIGCONT that bundle
    code can catch and count, a freeze runs nothing in the task. The reference's runner
    is frozen too only so that both sides come to their rounds alike, just thawed. A
    cgroup per rank, not one for all: each judge freezes its own rank's once every
    judge's earlier side has ended (judge/turns.py), so none freezes a rank whose runner
    is still timed.

    cgroup v2: the candidate's are children of the evaluation's memory cgroup (a cgroup
    without controllers for its children may hold processes beside them), the
    reference's children of a sibling of it, outside the candidate's cap. cgroup v1: the
    `freezer` hierarchy (`freezer.state`), beside the memory one."""

    def __init__(self, paths: dict[str, list[Path]], tops: list[Path]) -> None:
        self.paths = paths  # per runner ("reference", "candidate"), per rank
        self.tops = tops  # folders made for them, removed after them

    @classmethod
    def create(cls, name: str, ranks: int, memory: EvaluationCgroup | None) -> Freezers:
        """Raises CgroupError where this host gives no freezer to make."""
        try:
            if memory is not None and memory.version == 2:
                outside = memory.path.parent / f"{name}-reference"
                tops = {"candidate": memory.path, "reference": outside}
                return cls._made(tops, ranks, made=[outside])
            path = _own_groups().get("freezer")
            if path is not None and (ROOT / "freezer").is_dir():
                base = ROOT / "freezer" / path.lstrip("/")
                thaw_abandoned(base)
                _remove_stale(base)
                top = base / f"{name}{OWNER}{os.getpid()}"
                return cls._made(dict.fromkeys(RUNNERS, top), ranks, made=[top])
        except OSError as exc:
            raise CgroupError(f"no freezer: {exc}") from exc
        raise CgroupError("no freezer: no cgroup v2 memory cgroup, no v1 freezer hierarchy")

    @classmethod
    def _made(cls, tops: dict[str, Path], ranks: int, *, made: list[Path]) -> Freezers:
        done = cls({runner: [] for runner in RUNNERS}, [])
        try:
            for top in made:
                top.mkdir()
                done.tops.append(top)
            for runner in RUNNERS:
                for rank in range(ranks):
                    path = tops[runner] / f"{runner}-{rank}"
                    path.mkdir()
                    done.paths[runner].append(path)
        except OSError:
            done.close()  # none left behind half made
            raise
        return done

    def add(self, runner: str, rank: int, pids: list[int]) -> None:
        """Processes of `runner`'s rank `rank` moved in: what they start from then on
        starts inside."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # one that ended meanwhile
                (self.paths[runner][rank] / "cgroup.procs").write_text(str(pid))

    def thaw(self, runner: str) -> None:
        """Every rank of `runner` thawed. On cgroup v1 a frozen process does not die of
        SIGKILL until thawed: every kill of a runner's processes comes with this."""
        for path in self.paths[runner]:
            with contextlib.suppress(OSError):
                set_frozen(path, False, timeout_s=0.0)

    def close(self) -> None:
        for runner in RUNNERS:
            self.thaw(runner)
        for path in [*self.paths["reference"], *self.paths["candidate"], *self.tops[::-1]]:
            _remove(path)


def thaw_abandoned(base: Path) -> None:
    """Thaw the v1 freezers of evaluations whose worker died (its pid, in the folder's
    name, gone): a worker killed while a judge held a runner frozen leaves that runner
    frozen, and on cgroup v1 a frozen process cannot die of its parent's death signal
    until thawed. Thawed, such orphans die, and a later sweep removes the folders."""
    for top in base.glob(f"pkb-eval-*{OWNER}*"):
        owner = top.name.rsplit(OWNER, 1)[1]
        if owner.isdigit() and not _alive(int(owner)):
            for rank in top.iterdir():
                if rank.is_dir():
                    with contextlib.suppress(OSError):
                        set_frozen(rank, False, timeout_s=0.0)
                        rank.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def set_frozen(path: Path, frozen: bool, *, timeout_s: float) -> bool:
    """Freeze or thaw the cgroup at `path`, then wait at most `timeout_s` until the kernel
    says it is done; whether it is. A process inside some system calls freezes only as it
    leaves them."""
    v1 = (path / "freezer.state").exists()
    state = "FROZEN" if frozen else "THAWED"
    if v1:
        (path / "freezer.state").write_text(state)
    else:
        (path / "cgroup.freeze").write_text("1" if frozen else "0")
    end = time.monotonic() + timeout_s
    while True:
        if v1:
            done = (path / "freezer.state").read_text().strip() == state
        else:
            done = f"frozen {int(frozen)}" in (path / "cgroup.events").read_text().splitlines()
        if done or time.monotonic() >= end:
            return done
        time.sleep(0.0002)


def _remove(path: Path) -> None:
    """rmdir once the kernel has let the cgroup's last process (and its charge) go."""
    end = time.monotonic() + CLOSE_TIMEOUT_S
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if time.monotonic() > end:
                log.warning("cgroup %s not removed: %s", path, exc)
                return
            time.sleep(0.05)


def join(procs: str) -> None:
    """Move the calling process into the cgroup whose cgroup.procs is `procs` ("-": none).
    The launcher calls this while still root; what it starts is charged there."""
    if procs != "-":
        Path(procs).write_text(str(os.getpid()))
