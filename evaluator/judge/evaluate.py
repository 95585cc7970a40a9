"""Evaluates a bundle: the trusted orchestration around the three pools of rank processes.

The judges, the reference's runners and the candidate's runners, W ranks each, live for
the whole bundle and are reused across problems; the candidates are restarted after any
failure or flag, all three after a failure on the trusted side. The seed secret stays in
this process: judges get derived trial seeds only, runners none (docs/architecture.md).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import torch

from evaluator.contract import Artifact, Mode, ProblemResult
from evaluator.host import bubblewrap, cgroups, cleanup, reference_box, sandbox
from evaluator.host.environment import environment_fingerprint
from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import Settings
from evaluator.intake.bundle import Bundle
from evaluator.intake.compile import import_solutions
from evaluator.judge import profiling
from evaluator.judge.modes import ProfileRun, problem_run
from evaluator.judge.pool import EvaluatorError, RankPools
from evaluator.judge.problem_run import ProblemRun
from evaluator.judge.rank_pool import PoolTimeout, RankDied
from evaluator.rank_process import NO_MULTICAST
from evaluator.runtime import EXTENSION_CACHE_ENV
from problems.registry import all_problems
from problems.spec import Problem

log = logging.getLogger(__name__)
CUDA_CHECK_TIMEOUT_S = 180  # a first CUDA context, and torch's import

# The host's peer bandwidth (GB/s) by (profile, world size), measured once per process.
PEER_BANDWIDTH: dict[tuple[str, int], dict[str, float]] = {}
# The rendezvous of symmetric memory alone takes ~3 s the first time.
PROBE_TIMEOUT_S = 120.0

Progress = Callable[[int, int, str], None]
# Called after each case with (problem slug, case name, one pair's numbers) per pair of
# rounds: what `python -m evaluator.tools.floor --calibrate` reads (same code, both sides).
RoundObserver = Callable[[str, str, dict[str, Any]], None]
# Called after each counted pair with (problem slug, case name), while every runner waits
# for the next: `python -m evaluator.tools.floor` times its events there, in the same
# seconds as the pair it is held against.
PairObserver = Callable[[str, str], None]


def evaluate_bundle(
    bundle: Bundle,
    *,
    slugs: list[str],
    profile: HardwareProfile,
    settings: Settings,
    evaluation_id: str,
    on_progress: Progress | None = None,
    problems: Mapping[str, Problem] | None = None,
    on_round: RoundObserver | None = None,
    between_pairs: PairObserver | None = None,
    on_result: Callable[[ProblemResult], None] | None = None,
    mode: Mode = Mode.RANKED,
    profile_case: str = "",
    on_artifact: Callable[[Artifact], None] | None = None,
) -> tuple[list[ProblemResult], dict[str, Any]]:
    """Judge the bundle's solutions of `slugs`, in that order, on `profile`'s ranks.

    `problems` replaces the repository's catalog (tests, unpublished problems). A crash or
    hang of bundle code is a result; only a broken host raises EvaluatorError. `on_result`
    gets each problem's result as soon as it is judged (on GPUs, hours before the last).
    `mode` is the submission's (judge/modes.py); a profile run's `profile_case` must be a
    dev case of every problem (else ProfileCaseError, before anything runs), and
    `on_artifact` gets its traces and summaries.
    """
    catalog = dict(problems) if problems is not None else {p.slug: p for p in all_problems()}
    if mode == Mode.PROFILE:
        profiling.check_case_name(catalog, slugs, profile_case)
    _check_host(profile)
    environment = environment_fingerprint(profile)
    identity = settings.candidate_user
    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="pkb-eval-", dir=settings.scratch_dir))
    if identity is not None:
        # Root's own; the candidate user may pass through (not list) to its folders.
        scratch.chmod(0o711)
    try:
        sandbox.check_reachable(scratch, identity)
    except sandbox.SandboxError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise EvaluatorError(str(exc)) from exc
    env = candidate_environment(scratch)
    # Bundle code must not read this process's environment through /proc, and whatever it
    # detaches (double fork, setsid) must come back here to be killed.
    sandbox.not_dumpable()
    cleanup.become_subreaper()
    litter_before, began_at = cleanup.litter_entries(), time.time()
    group = memory_cgroup(scratch.name, settings.evaluation_memory_bytes)
    freezers = candidate_freezers(scratch.name, profile.world_size, group)
    try:
        jail, executable = start_sandbox(scratch / "sandbox", settings, group)
    except sandbox.SandboxError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        close_cgroups(freezers, group)
        raise EvaluatorError(f"bundle code cannot be confined: {exc}") from exc
    environment["memory_cap_mb"] = (
        settings.evaluation_memory_bytes >> 20
        if group is not None and isinstance(jail, bubblewrap.Sandbox)
        else None
    )
    environment["network_isolated"] = jail is not None
    environment["candidate_frozen"] = freezers is not None
    environment["sandbox"] = (
        "bubblewrap" if isinstance(jail, bubblewrap.Sandbox) else "namespaces" if jail else None
    )
    environment["candidate_user"] = identity.name if identity else None
    # multiprocessing's resource tracker is a child that outlives us all: started through
    # the launcher it holds no copy of the worker's environment for bundle code to read;
    # as the worker's user (not the candidate user), so bundle code cannot kill it.
    tracker_launcher = str(sandbox.launcher(scratch / "sandbox", None)) if executable else None
    twin = reference_box.for_evaluation(scratch, jail, profile.backend, settings)
    with sandbox.spawning_with(tracker_launcher):
        resource_tracker.ensure_running()
    pools = RankPools(
        world_size=profile.world_size,
        backend=profile.backend,
        scratch=scratch,
        candidate_env=env,
        limits=settings.limits,
        executable=executable,
        protected=[jail.holder.pid] if jail else [],
        identity=identity,
        strays=jail.kill_strays if isinstance(jail, bubblewrap.Sandbox) else None,
        reference_box=twin,
        freezers=freezers,
    )
    try:
        bundle.write_to(scratch / "bundle")
        sandbox.hand_over([scratch / name for name in CANDIDATE_FOLDERS], identity)
        runs = [
            problem_run(
                mode,
                slug=slug,
                problem=catalog.get(slug),
                solutions=dict(bundle.solutions),
                pools=pools,
                profile=profile,
                settings=settings,
                evaluation_id=evaluation_id,
                on_round=on_round,
                between_pairs=between_pairs,
            )
            for slug in slugs
        ]
        runnable = [run for run in runs if not run.why_not_run()]
        _plan_profiles(runs, runnable, profile_case, profile.world_size)
        began = time.monotonic()
        failures = import_solutions(
            {run.filename: run.module for run in runnable},
            folder=scratch / "bundle",
            env=env,
            logs=pools.logs,
            timeout_s=settings.problem_timeout_s,
            limits=settings.limits,
            executable=executable,
            identity=identity,
        )
        pools.sweep_orphans()
        environment["compile_s"] = round(time.monotonic() - began, 3)
        for run in runnable:
            run.import_failure = failures.get(run.filename)
        if mode != Mode.TEST and any(run.import_failure is None for run in runnable):
            bandwidth = peer_bandwidth(pools, profile, settings)
            if bandwidth is not None:
                environment["peer_bandwidth_gbps"] = bandwidth
                for run in runs:
                    run.bandwidth_gbps = bandwidth["used"]
        results = []
        for done, run in enumerate(runs):
            if on_progress:
                on_progress(done, len(runs), run.slug)
            results.append(run.evaluate())
            if on_result:
                on_result(results[-1])
            if on_artifact and isinstance(run, ProfileRun):
                for artifact in run.artifacts:
                    on_artifact(artifact)
        if on_progress:
            on_progress(len(runs), len(runs), "")
        return results, environment
    finally:
        pools.stop()
        if twin is not None:
            twin.close(remove=not settings.keep_scratch)
        if jail is not None:
            jail.close()
            pools.sweep_orphans()  # what the sandbox held comes back to us as it dies
        close_cgroups(freezers, group)
        cleanup.remove_litter(litter_before, since=began_at, identity=identity)
        if settings.keep_scratch:
            log.info("kept scratch directory %s", scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _plan_profiles(
    runs: list[ProblemRun], runnable: list[ProblemRun], case: str, world_size: int
) -> None:
    """Each profile run's case name, and its traces' share of the artifacts' cap."""
    cap = profiling.trace_cap(len(runnable), world_size)
    for run in runs:
        if isinstance(run, ProfileRun):
            run.case_name, run.trace_cap = case, cap


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
        if jail is None:
            return False
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
            f"CUDA does not work in the bubblewrap sandbox ({exc}); set PKB_SANDBOX=namespaces "
            "to run bundle code in the network jail alone (docs/security.md)"
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


def candidate_freezers(
    name: str, ranks: int, memory: cgroups.EvaluationCgroup | None
) -> cgroups.CandidateFreezers | None:
    """A cgroup per candidate rank to freeze while the reference is timed, or None where
    the host gives none (the process group's stop then holds what stays in it)."""
    try:
        return cgroups.CandidateFreezers.create(name, ranks, memory)
    except cgroups.CgroupError as exc:
        log.warning(
            "NO FREEZER for the candidate's processes: one that leaves its process group "
            "runs on while the reference is timed (%s)",
            exc,
        )
        return None


def close_cgroups(
    freezers: cgroups.CandidateFreezers | None, memory: cgroups.EvaluationCgroup | None
) -> None:
    # The freezers first: on cgroup v2 they are the memory cgroup's children.
    if freezers is not None:
        freezers.close()
    if memory is not None:
        memory.close()


def start_sandbox(
    folder: Path, settings: Settings, group: cgroups.EvaluationCgroup | None = None
) -> tuple[bubblewrap.Sandbox | sandbox.NetworkJail | None, str | None]:
    """The candidate's sandbox (bubblewrap's, else the network jail; None where the host
    refuses both) and the launcher of bundle code. `folder` is in the evaluation's scratch
    folder, which the sandbox shows its processes; processes launched into a bubblewrap
    sandbox are charged to `group`.

    Raises SandboxError where bundle code cannot be switched to the candidate user."""
    identity = settings.candidate_user
    if settings.isolate_network and settings.sandbox == "bubblewrap":
        ids = sandbox.candidate_ids(identity)
        try:
            procs = str(group.procs) if group is not None else "-"
            box = bubblewrap.Sandbox.start(
                folder, folder.parent, *ids, cgroup=procs, shared=settings.sandbox_shared
            )
        except (OSError, RuntimeError) as exc:
            log.error(
                "NO BUBBLEWRAP SANDBOX (%s): bundle code gets the network jail alone, with "
                "the host's files, sockets and processes in its reach",
                exc,
            )
        else:
            return box, box.executable
    jail = sandbox.NetworkJail.start(folder, identity) if settings.isolate_network else None
    if jail is not None:
        return jail, jail.executable
    if settings.isolate_network:
        log.warning(
            "CANDIDATES HAVE NETWORK ACCESS: this host allows no user and network namespace "
            "(set PKB_ISOLATE_NETWORK=false to acknowledge)"
        )
    return None, sandbox.plain_launcher(folder, identity)


def peer_bandwidth(
    pools: RankPools, profile: HardwareProfile, settings: Settings
) -> dict[str, float] | None:
    """The peer bandwidth of this host, measured once per process by the judge ranks.

    None on gloo, or when the measurement failed (then no result gets a roofline).
    """
    if profile.backend != "nccl" or profile.world_size < 2:
        return None  # one rank has no peers: nothing to measure (a host of one GPU)
    key = (profile.name, profile.world_size)
    if key not in PEER_BANDWIDTH:
        pools.ensure_started()
        try:
            replies = pools.command(
                {"judge": ("probe", {})},
                timeout_s=max(PROBE_TIMEOUT_S, settings.problem_timeout_s),
            )
        except (RankDied, PoolTimeout) as exc:
            log.error("peer bandwidth probe failed: %s", exc)
            pools.kill()
            return None
        if not all(r.data.get("ok") for r in replies):
            log.error("peer bandwidth probe failed: %s", [r.data.get("error") for r in replies])
            pools.kill()
            return None
        measured = replies[0].data["bandwidth"]
        PEER_BANDWIDTH[key] = {k: float(measured[k]) for k in ("one_peer", "all_peers", "used")}
        log.info("peer bandwidth of %s: %s GB/s", profile.name, PEER_BANDWIDTH[key])
    return dict(PEER_BANDWIDTH[key])


def _check_host(profile: HardwareProfile) -> None:
    if profile.backend != "nccl":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < profile.world_size:
        raise EvaluatorError(
            f"profile {profile.name} needs {profile.world_size} CUDA GPUs; this host has {count}"
        )
