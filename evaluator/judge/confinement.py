"""The walls an evaluation puts around bundle code: the candidate's environment and
writable folders, its sandbox (bubblewrap's, else the network jail), the evaluation's
memory cap and the candidate ranks' freezers (host/cgroups.py), and the checks a worker
runs at start-up that bundle code can run where it must (docs/security.md)."""

from __future__ import annotations

import glob
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from evaluator.contract import SANDBOX_FAULT
from evaluator.host import bubblewrap, cgroups, sandbox
from evaluator.host.settings import Settings
from evaluator.rank_process import NO_MULTICAST
from evaluator.runtime import EXTENSION_CACHE_ENV

log = logging.getLogger(__name__)
CUDA_CHECK_TIMEOUT_S = 180  # a first CUDA context, and torch's import

# The folders of the scratch directory that bundle code may write (handed over to the
# candidate user); everything else there (logs, the launcher, judges' files) is root's.
CANDIDATE_FOLDERS = ("bundle", "home", "tmp", "extensions", "triton")


def candidate_environment(scratch: Path) -> dict[str, str]:
    """Variables of every process that runs bundle code, compile pass included.

    Build caches live in the evaluation's scratch directory: one team's bundle must never
    find a build planted by another's (a shared cache would let it).
    """
    for name in CANDIDATE_FOLDERS[1:]:
        (scratch / name).mkdir(exist_ok=True, mode=0o700)
    return {
        EXTENSION_CACHE_ENV: str(scratch / "extensions"),
        "TRITON_CACHE_DIR": str(scratch / "triton"),
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        # The sandbox's network is a loopback alone, and its host name resolves nowhere:
        # gloo would say so in every rank's log (and take that as its cue to use lo).
        "GLOO_SOCKET_IFNAME": "lo",
        **NO_MULTICAST,
    }


def check_sandbox(settings: Settings) -> bool:
    """At worker start-up: say loudly whether bundle code will have network access, and
    raise SandboxError where it could not run as the candidate user."""
    sandbox.not_dumpable()
    check_identity(settings)
    if not settings.isolate_network:
        log.warning("PKB_ISOLATE_NETWORK=false: CANDIDATES HAVE NETWORK ACCESS")
        return False
    with tempfile.TemporaryDirectory(prefix="pkb-sandbox-check-") as folder:
        os.chmod(folder, 0o711)  # the sandbox's holder runs as the candidate user
        jail, _ = start_sandbox(Path(folder) / "sandbox", settings)
        assert jail is not None  # start_sandbox raises instead, when isolating
        try:
            if isinstance(jail, bubblewrap.Sandbox) and glob.glob("/dev/nvidia[0-9]*"):
                check_cuda_inside(jail)
        finally:
            jail.close()
    if isinstance(jail, bubblewrap.Sandbox):
        log.info("bundle code runs in a bubblewrap sandbox (evaluator/host/bubblewrap.py)")
    else:
        log.info("bundle code runs in a network namespace of its own (loopback only)")
    return True


def check_cuda_inside(box: bubblewrap.Sandbox) -> None:
    """A GPU host's sandbox must give bundle code its GPUs: a worker whose candidates would
    all fail stops at start instead, saying what to do."""
    code = "import torch; torch.zeros(1, device='cuda').sum().item(); print('cuda ok')"
    try:
        box.run_inside(code, expect="cuda ok", timeout_s=CUDA_CHECK_TIMEOUT_S)
    except RuntimeError as exc:
        raise sandbox.SandboxError(
            f"{SANDBOX_FAULT}: CUDA does not work in the bubblewrap sandbox ({exc}); "
            "PKB_SANDBOX=namespaces (a development setting, README) runs bundle code in the "
            "network jail alone"
        ) from exc
    log.info("CUDA works in the bubblewrap sandbox")


def check_identity(settings: Settings) -> None:
    """Bundle code, as the candidate user, can reach the scratch folder and import the
    harness (interpreter, packages and repository readable); else SandboxError."""
    identity = settings.candidate_user
    if identity is None:
        log.info(
            "bundle code runs as the worker's user (uid %d): the worker is not root", os.geteuid()
        )
        return
    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    sandbox.check_reachable(settings.scratch_dir, identity)
    with tempfile.TemporaryDirectory(prefix="pkb-identity-check-") as folder:
        executable = sandbox.plain_launcher(Path(folder), identity)
        assert executable is not None  # plain_launcher raises instead, with an identity
        code = f"import sys; sys.path[:0] = {sys.path!r}; import evaluator.candidate.runner"
        done = subprocess.run(
            [executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    if done.returncode != 0:
        raise sandbox.SandboxError(
            f"bundle code cannot import the harness as {identity.name}: {done.stderr[-800:]}"
        )
    log.info("bundle code runs as %s (uid %d, gid %d)", identity.name, identity.uid, identity.gid)


def memory_cgroup(name: str, limit_bytes: int) -> cgroups.EvaluationCgroup | None:
    """The evaluation's memory cap, or None (no cap asked, or none this host can make)."""
    if not limit_bytes:
        return None
    try:
        return cgroups.EvaluationCgroup.create(name, limit_bytes)
    except cgroups.CgroupError as exc:
        log.warning("NO MEMORY CAP for this evaluation's bundle code: %s", exc)
        return None


def runner_freezers(
    name: str, ranks: int, memory: cgroups.EvaluationCgroup | None
) -> cgroups.Freezers | None:
    """A cgroup per rank of each runner, to freeze while the other is timed, or None where
    the host gives none: then neither runner stands still (no signal replaces the freeze,
    judge/processes.py, `frozen`), and the environment says `candidate_frozen: false`."""
    try:
        return cgroups.Freezers.create(name, ranks, memory)
    except cgroups.CgroupError as exc:
        log.warning(
            "NO FREEZER for the candidate's processes (a development host): they run on "
            "while the reference is timed, and speedups here are not to be trusted (%s)",
            exc,
        )
        return None


def close_cgroups(
    freezers: cgroups.Freezers | None, memory: cgroups.EvaluationCgroup | None
) -> None:
    # The freezers first: on cgroup v2 the candidate's are the memory cgroup's children.
    if freezers is not None:
        freezers.close()
    if memory is not None:
        memory.close()


def start_sandbox(
    folder: Path, settings: Settings, group: cgroups.EvaluationCgroup | None = None
) -> tuple[bubblewrap.Sandbox | sandbox.NetworkJail | None, str | None]:
    """The candidate's sandbox, the one the settings name and no other, and the launcher
    of bundle code. `folder` is in the evaluation's scratch folder, which the sandbox shows
    its processes; processes launched into a bubblewrap sandbox are charged to `group`.

    Fails closed: SandboxError (a platform fault: nothing is judged) where the sandbox
    asked for cannot start, never a weaker one instead. Weaker ones run only where the
    operator names them (PKB_SANDBOX=namespaces, PKB_ISOLATE_NETWORK=false)."""
    identity = settings.candidate_user
    if not settings.isolate_network:
        return None, sandbox.plain_launcher(folder, identity)
    if settings.sandbox == "namespaces":
        jail = sandbox.NetworkJail.start(folder, identity)
        if jail is None:
            raise sandbox.SandboxError(f"{SANDBOX_FAULT} (PKB_SANDBOX=namespaces): see the log")
        return jail, jail.executable
    scratch = folder.parent
    for name in CANDIDATE_FOLDERS:  # mount points: the bundle's is filled in afterwards
        (scratch / name).mkdir(exist_ok=True, mode=0o700)
    try:
        box = bubblewrap.Sandbox.start(
            folder,
            scratch,
            *sandbox.candidate_ids(identity),
            cgroup=str(group.procs) if group is not None else "-",
            shared=settings.sandbox_shared,
            capped=[scratch / name for name in CANDIDATE_FOLDERS[1:]],
            readonly=[scratch / CANDIDATE_FOLDERS[0]],
            tmp_bytes=settings.sandbox_tmp_bytes,
        )
    except (OSError, RuntimeError) as exc:
        raise sandbox.SandboxError(f"{SANDBOX_FAULT} (bubblewrap): {exc}") from exc
    return box, box.executable
