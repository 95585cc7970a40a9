"""Evaluates a bundle: the trusted orchestration around the three pools of rank processes.

The judges, the reference's runners and the candidate's runners, W ranks each, live for
the whole bundle and are reused across problems; the candidates are restarted after any
failure or flag, all three after a failure on the trusted side. The seed secret stays in
this process: judges get derived trial seeds only, runners none (docs/architecture.md).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import torch

from evaluator.contract import Artifact, Mode, ProblemResult
from evaluator.host import bubblewrap, cleanup, reference_box, sandbox
from evaluator.host.environment import environment_fingerprint
from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import Settings
from evaluator.intake.bundle import Bundle
from evaluator.intake.compile import import_solutions
from evaluator.intake.precheck import precheck_files, with_review
from evaluator.judge import profiling
from evaluator.judge.confinement import (
    CANDIDATE_FOLDERS,
    candidate_environment,
    close_cgroups,
    memory_cgroup,
    runner_freezers,
    start_sandbox,
)
from evaluator.judge.modes import ProfileRun, problem_run
from evaluator.judge.pool import EvaluatorError, RankPools, SandboxFault
from evaluator.judge.problem_run import ProblemRun
from evaluator.judge.rank_pool import PoolTimeout, RankDied
from problems.registry import all_problems
from problems.spec import Problem

log = logging.getLogger(__name__)

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
    # Before any GPU time; the findings travel with each problem's result (its `review`).
    review = precheck_files(bundle.files, bundle.solutions)
    started = time.monotonic()
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
    freezers = runner_freezers(scratch.name, profile.world_size, group)
    try:
        jail, executable = start_sandbox(scratch / "sandbox", settings, group)
    except sandbox.SandboxError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        close_cgroups(freezers, group)
        raise SandboxFault(f"bundle code cannot be confined: {exc}") from exc
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
        if runnable:
            pools.warm_up()
        began = time.monotonic()
        # Scratch folder, cgroups, the container, the reference's box, the bundle written.
        environment["sandbox_start_s"] = round(began - started, 3)
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
            results.append(with_review(run.evaluate(), review.get(run.slug, [])))
            if on_result:
                on_result(results[-1])
            if on_artifact and isinstance(run, ProfileRun):
                for artifact in run.artifacts:
                    on_artifact(artifact)
        if on_progress:
            on_progress(len(runs), len(runs), "")
        environment["pool_starts_s"] = list(pools.starts_s)
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
