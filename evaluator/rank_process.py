"""What every rank process does before its first command, judge or runner alike.

A rank process is spawned by the evaluator (`evaluator.judge.pool`) with a `RankSetup`: it puts
itself in a process group of its own (so killing the group kills whatever it started),
dies with its parent, joins its kind's process group (NCCL on GPU hosts, gloo on CPU), and
answers its parent in JSON. Processes that run bundle code first keep only the toolchain's
environment and send their output to a log file.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator.host import rlimits, sandbox

# A runner writing a runaway log (or any file) past this gets SIGXFSZ, not a full disk.
MAX_CANDIDATE_FILE_BYTES = 256 * 1024 * 1024
# The parent's per-problem deadline, not this, ends a hung collective.
COLLECTIVE_TIMEOUT = timedelta(hours=2)
_PR_SET_PDEATHSIG = 1
# Never NVLink multicast on shared hosts (see docs/architecture.md), whatever the worker's
# environment.
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class RankSetup:
    rank: int
    world_size: int
    backend: str
    rendezvous: str  # path of the file:// rendezvous file, fresh for each pool start
    # A judge's ends of its pipes to its runners (reference, candidate), or a runner's end
    # of the pipe to its judge.
    peers: tuple[Connection, ...]
    threads: int
    log_path: str | None = None  # runners only
    env: dict[str, str] = field(default_factory=dict)  # set before anything else runs
    limits: rlimits.Limits | None = None  # candidates only
    # The CPU cores the rank runs on (empty: any). On GPU hosts with the cores to spare,
    # a rank's two runners share one core and its judge has another (`cores_for`).
    cores: tuple[int, ...] = ()
    # The reference's runner under the candidate's seccomp filter (bubblewrap hosts): a
    # filtered process pays for every system call, and both sides should pay alike.
    seccomp: bool = False


def start(setup: RankSetup, *, untrusted: bool) -> torch.device:
    """Everything before the first command; the rank's device."""
    os.setpgid(0, 0)  # first: from here on the parent can kill us and all we start
    die_with_parent()
    # No /proc/<pid>/mem, maps or environ, and no ptrace, process_vm_readv or
    # pidfd_getfd, for a process of the same user: judges hold the seeds and the
    # reference's outputs; a candidate rank holds its arena and its pipe to its judge,
    # which a sibling rank (same user, same pid namespace) must reach only through the
    # problem's communication. The sandbox's filter refuses turning it back on.
    sandbox.not_dumpable()
    if untrusted:
        scrub_environment(setup.env)
    else:
        os.environ.update(setup.env)
    if setup.log_path:
        cap = setup.limits.file_bytes if setup.limits is not None else 0
        confine_output(setup.log_path, cap or MAX_CANDIDATE_FILE_BYTES)
    if setup.cores:
        os.sched_setaffinity(0, set(setup.cores))
    torch.set_num_threads(setup.threads)
    device = init_distributed(setup)
    if setup.limits is not None:
        for failure in rlimits.apply_limits(setup.limits, cuda=device.type == "cuda"):
            print(f"pkb sandbox: a limit could not be set: {failure}", file=sys.stderr)
    if setup.seccomp:
        from evaluator.host.bubblewrap import seccomp_filter

        seccomp_filter()
    return device


def cores_for(kind: str, rank: int, world_size: int, backend: str) -> tuple[int, ...]:
    """Where a rank runs on a GPU host with two physical cores a rank to spare besides one
    for the evaluating process: the reference's and the candidate's runners of a rank on
    one core (they never run at once; sharing one puts both in the same speed phases of
    the host, as a probe on one H100 showed), its judge on another physical core (it
    polls while a runner works: on the runners' hyperthread sibling it would slow them).
    Logical CPUs where the host shows no topology or too few cores; elsewhere (CPU hosts:
    ranks outnumber cores) anywhere. Not enforced: a process may move its own threads
    (NCCL's and CUDA's do, so a check of every thread's affinity flagged honest code on
    one H100); a cgroup's cpuset would make it a wall."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if backend != "nccl":
        return ()
    slot = 1 + 2 * rank + (kind != "judge")
    cores = physical_cores(cpus)
    if len(cores) >= 2 * world_size + 1:
        return (cores[slot][0],)
    if len(cpus) >= 2 * world_size + 1:
        return (cpus[slot],)
    return ()


def physical_cores(cpus: list[int], root: str = "/sys/devices/system/cpu") -> list[list[int]]:
    """`cpus` grouped by physical core (hyperthread siblings together), in order; [] when
    the host does not say."""
    cores: dict[tuple[int, ...], list[int]] = {}
    allowed = set(cpus)
    for cpu in cpus:
        try:
            text = Path(f"{root}/cpu{cpu}/topology/thread_siblings_list").read_text()
        except OSError:
            return []
        siblings = tuple(sorted(c for c in _cpu_list(text) if c in allowed)) or (cpu,)
        cores.setdefault(siblings, []).append(cpu)
    return list(cores.values())


def _cpu_list(text: str) -> list[int]:
    """A kernel CPU list ("0-1", "0,16", "2-3,18-19") as numbers."""
    found: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            found.extend(range(int(low), int(high) + 1))
        elif part.strip():
            found.append(int(part))
    return found


def scrub_environment(extra: dict[str, str]) -> None:
    """Keep only the toolchain variables (sandbox.KEPT_*), then set `extra` (caches,
    scratch HOME and TMPDIR, multicast off). The initial environment block, what
    /proc/self/environ shows, is scrubbed by the sandbox launcher where it runs."""
    keep = sandbox.scrubbed(os.environ)
    for name in list(os.environ):
        if name not in keep:
            del os.environ[name]
    os.environ.update(extra)


def init_distributed(setup: RankSetup) -> torch.device:
    kwargs: dict[str, Any] = {}
    if setup.backend == "nccl":
        os.environ.update(NO_MULTICAST)  # forced, not defaulted: a host must never opt in
        device = torch.device("cuda", setup.rank)
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        setup.backend,
        init_method=f"file://{setup.rendezvous}",
        rank=setup.rank,
        world_size=setup.world_size,
        timeout=COLLECTIVE_TIMEOUT,
        **kwargs,
    )
    return device


def import_solution(path: Path, module_name: str) -> Any:
    """Import a bundle file as `module_name`, from its own folder; returns its `solution`."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # so that `import _helper` works
    os.chdir(path.parent)  # files a solution writes land in the scratch directory
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    solution = getattr(module, "solution", None)
    if not callable(solution):
        raise TypeError(f"{path.name} defines no callable solution")
    return solution


def confine_output(log_path: str, cap: int = MAX_CANDIDATE_FILE_BYTES) -> None:
    """Bundle code's output goes to its log; no file it writes grows past `cap` (the
    host's Limits.file_bytes: set here, before anything is written, since the log of a
    restarted rank may already be at the cap)."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    cap = min(cap, MAX_CANDIDATE_FILE_BYTES)
    # Never above a cap already set: a process forked by the import server inherits its
    # limits, and an unprivileged process cannot raise them (a ValueError, which failed
    # every import when the host sets Limits.file_bytes below MAX_CANDIDATE_FILE_BYTES).
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))


def die_with_parent() -> None:
    # If the evaluator itself is killed (Celery's hard time limit), its ranks follow.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def wait_readable(conn: Connection, spin_s: float) -> None:
    """Return when `conn` has a message: polling for up to `spin_s`, then blocking.

    Inside a timed round a blocked process's wake-up (tens to hundreds of microseconds on
    a virtual machine, and as variable) would be part of what the judge's clock measures;
    polling keeps it to a few microseconds. GPU hosts only: they have a core per waiting
    process, where a CPU host's ranks share two."""
    if spin_s > 0:
        end = time.perf_counter() + spin_s
        while time.perf_counter() < end:
            if conn.poll(0):
                return
    conn.poll(None)


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def to_json(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode("utf-8")


def reply(conn: Connection, data: dict[str, Any]) -> None:
    conn.send_bytes(to_json(data))
