"""The sandbox's own checks, with real bwrap: a launcher that cannot enter fails once, at
the sandbox's start (and the evaluator falls back to the network jail, loudly), not in
every rank; a GPU host whose sandbox gives bundle code no CUDA stops its worker at start."""

from __future__ import annotations

import dataclasses
import glob
import logging
import os

import pytest

from evaluator.host import bubblewrap, sandbox
from evaluator.host.settings import load_settings
from evaluator.judge.evaluate import check_cuda_inside, start_sandbox
from tests.evaluator.scratch import reachable_folder

pytestmark = pytest.mark.skipif(bubblewrap.bwrap_binary() is None, reason="no bwrap")
NOWHERE = "/nonexistent/cgroup.procs"  # no folder: even root cannot write it


def _ids() -> tuple[int, int]:
    identity = load_settings({}).candidate_user
    return (identity.uid, identity.gid) if identity else (os.geteuid(), os.getegid())


def test_a_launcher_that_cannot_enter_fails_the_start_and_the_evaluator_falls_back(caplog):
    with reachable_folder("bwrap-start") as scratch:
        with pytest.raises(RuntimeError, match="cannot enter the sandbox"):
            bubblewrap.Sandbox.start(scratch / "a", scratch, *_ids(), cgroup=NOWHERE)
        broken = dataclasses.replace(load_settings({}), sandbox="bubblewrap")

        class Unjoinable:
            procs = NOWHERE

        with caplog.at_level(logging.ERROR):
            jail, executable = start_sandbox(scratch / "b", broken, Unjoinable())  # type: ignore[arg-type]
        try:
            assert isinstance(jail, sandbox.NetworkJail) and executable == jail.executable
            assert "NO BUBBLEWRAP SANDBOX" in caplog.text
        finally:
            jail.close()


def test_a_sandbox_without_cuda_stops_a_gpu_worker_saying_what_to_do():
    with reachable_folder("bwrap-cuda") as scratch:
        box = bubblewrap.Sandbox.start(scratch / "sandbox", scratch, *_ids())
        try:
            if glob.glob("/dev/nvidia[0-9]*"):  # a GPU host: CUDA must work inside
                check_cuda_inside(box)
                return
            with pytest.raises(sandbox.SandboxError, match="PKB_SANDBOX=namespaces"):
                check_cuda_inside(box)  # no GPU here: torch says so inside
        finally:
            box.close()
