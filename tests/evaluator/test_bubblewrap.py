"""The sandbox's own checks, with real bwrap: a launcher that cannot enter fails once, at
the sandbox's start (and nothing weaker runs instead: a platform fault), not in every
rank; a GPU host whose sandbox gives bundle code no CUDA stops its worker at start;
the sweep of what bundle code left inside kills only what it sees inside."""

from __future__ import annotations

import dataclasses
import glob
import logging

import pytest

from evaluator.contract import SANDBOX_FAULT, ProblemStatus
from evaluator.host import bubblewrap, rlimits, sandbox
from evaluator.host.settings import load_settings
from evaluator.judge.confinement import check_cuda_inside, start_sandbox
from tests.evaluator.judging import judge_files, small_settings
from tests.evaluator.scratch import reachable_folder
from tests.redteam import attacks

pytestmark = pytest.mark.skipif(bubblewrap.bwrap_binary() is None, reason="no bwrap")
NOWHERE = "/nonexistent/cgroup.procs"  # no folder: even root cannot write it


def _ids() -> tuple[int, int]:
    return sandbox.candidate_ids(load_settings({}).candidate_user)


def test_a_launcher_that_cannot_enter_fails_the_start_and_nothing_weaker_runs_instead():
    with reachable_folder("bwrap-start") as scratch:
        with pytest.raises(RuntimeError, match="cannot enter the sandbox"):
            bubblewrap.Sandbox.start(scratch / "a", scratch, *_ids(), cgroup=NOWHERE)
        broken = dataclasses.replace(load_settings({}), sandbox="bubblewrap")

        class Unjoinable:
            procs = NOWHERE

        with pytest.raises(sandbox.SandboxError, match=f"^{SANDBOX_FAULT}.*cannot enter"):
            start_sandbox(scratch / "b", broken, Unjoinable())  # type: ignore[arg-type]


def test_a_sandbox_that_hides_our_own_package_judges_nothing(monkeypatch):
    """Issue 40: a clone under /tmp judged every bundle as a compile error, its ranks unable
    to import the evaluator inside the sandbox. Here the sandbox shows every folder but the
    repository: its start fails as a sandbox fault (a platform fault, not charged, and the
    canary holds the worker), never a team's compile error."""
    repo = str(bubblewrap.REPOSITORY)
    shown = bubblewrap.kept_paths
    monkeypatch.setattr(
        bubblewrap,
        "kept_paths",
        lambda: [p for p in shown() if p != repo],  # its .venv, where it is one, stays
    )
    settings = dataclasses.replace(load_settings({}), sandbox="bubblewrap")
    with reachable_folder("bwrap-harness") as scratch:
        hidden = f"^{SANDBOX_FAULT}.*package .* is not importable"
        with pytest.raises(sandbox.SandboxError, match=hidden):
            start_sandbox(scratch / "sandbox", settings)


def test_a_sandbox_without_cuda_stops_a_gpu_worker_saying_what_to_do():
    with reachable_folder("bwrap-cuda") as scratch:
        box = bubblewrap.Sandbox.start(scratch / "sandbox", scratch, *_ids())
        try:
            if glob.glob("/dev/nvidia[0-9]*"):  # a GPU host: CUDA must work inside
                check_cuda_inside(box)
                return
            with pytest.raises(sandbox.SandboxError, match=SANDBOX_FAULT):
                check_cuda_inside(box)  # no GPU here: torch says so inside
        finally:
            box.close()


def test_a_closed_sandbox_sweeps_nothing():
    # The evaluation's end sweeps after the close. With the holder gone its namespace read
    # "", as does every process whose namespace the worker cannot read (this host's init):
    # the sweep sent those SIGKILL and counted them as bundle code's.
    with reachable_folder("bwrap-sweep") as scratch:
        box = bubblewrap.Sandbox.start(scratch / "sandbox", scratch, *_ids())
        box.close()
        assert box.kill_strays(set()) == []


def test_an_honest_bundle_leaves_nothing_behind(caplog):
    settings = dataclasses.replace(
        small_settings("sweep-secret-0123456789", warmup=1, iters=2, rounds=1),
        sandbox="bubblewrap",
    )
    with caplog.at_level(logging.WARNING, logger="evaluator"):
        files = {"honest.py": attacks.HONEST}
        result = judge_files(files, {"honest": attacks.problem("honest")}, settings, "sweep")
    assert result["honest"].status == ProblemStatus.PASSED, result["honest"].message
    assert "left behind" not in caplog.text


def _seccomp_mode_after_start(rendezvous: str, queue) -> None:  # a spawned process
    from pathlib import Path

    from evaluator import rank_process

    setup = rank_process.RankSetup(
        rank=0,
        world_size=1,
        backend="gloo",
        rendezvous=rendezvous,
        peers=(),
        threads=1,
        seccomp=True,
    )
    rank_process.start(setup, untrusted=False)
    status = Path("/proc/self/status").read_text()
    queue.put(next(line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:")))


def test_the_references_runner_takes_the_candidates_filter_in_bubblewrap(tmp_path):
    """Both sides of a speedup pay alike for a filtered process's system calls: where the
    candidates' sandbox is bubblewrap's, the reference's runner is filtered too."""
    import multiprocessing

    from evaluator.judge.pool import RankPools

    limits = rlimits.Limits(cpu_s=7200, open_files=4096)
    bwrap = RankPools(
        world_size=2, backend="gloo", scratch=tmp_path, limits=limits, strays=lambda keep: []
    )
    jail = RankPools(world_size=2, backend="gloo", scratch=tmp_path, limits=limits)
    setups = {
        (name, kind): [s for (s,) in pools._setups(kind, [(), ()])]
        for name, pools in (("bwrap", bwrap), ("jail", jail))
        for kind in ("reference", "candidate", "judge")
    }
    assert all(s.seccomp and s.limits is None for s in setups["bwrap", "reference"])
    assert all(s.limits == limits for s in setups["bwrap", "candidate"])
    assert not any(
        s.seccomp for key, group in setups.items() if key != ("bwrap", "reference") for s in group
    )
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_seccomp_mode_after_start, args=(str(tmp_path / "rdv"), queue))
    proc.start()
    assert queue.get(timeout=120) == "2"  # SECCOMP_MODE_FILTER
    proc.join(30)


def test_a_toolchain_outside_the_system_folders_is_shown_whole(tmp_path):
    """A CUDA extension's build runs nvcc and the host compiler: an image whose toolkit or
    compilers lie under /opt (found on PATH or named by CC/CXX) must have them inside."""
    from evaluator.host.bubblewrap import cuda_paths

    toolkit, toolset = tmp_path / "opt" / "cuda-13", tmp_path / "opt" / "gcc-13"
    for tool in (toolkit / "bin" / "nvcc", toolset / "bin" / "g++"):
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    env = {"PATH": f"/usr/bin:{toolkit / 'bin'}", "CXX": f"{toolset / 'bin' / 'g++'} -O2"}
    shown = cuda_paths(env)
    assert str(toolkit) in shown and str(toolset) in shown
    assert not [p for p in shown if p.startswith("/usr/")]  # shown with the system folders
