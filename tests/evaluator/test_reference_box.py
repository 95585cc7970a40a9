"""The reference's runner started as the candidate's is (evaluator/host/reference_box.py),
with real bwrap: only for GPU backends and a bubblewrap candidate; its folder beside the
evaluation's scratch folder, never in it; the runner as the candidate user, filtered from
its first instruction, in namespaces of its own, with the candidate's limits but the CPU
cap and the candidate's fixed layout; and nothing left once it closes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluator.host import bubblewrap, reference_box, sandbox
from evaluator.host.rlimits import Limits
from evaluator.host.settings import load_settings
from evaluator.judge.pool import RankPools
from tests.evaluator.scratch import reachable_folder

pytestmark = pytest.mark.skipif(bubblewrap.bwrap_binary() is None, reason="no bwrap")
LIMITS = Limits(cpu_s=600, open_files=1024, tasks=512, file_bytes=64 << 20)


def _ids() -> tuple[int, int]:
    return sandbox.candidate_ids(load_settings({}).candidate_user)


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, v in (line.split(":", 1) for line in lines if ":" in line)}


def _limit(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return line[len(name) :].split()[0]
    raise AssertionError(f"no {name!r} in /proc/{pid}/limits")


def test_only_gpu_backends_with_a_bubblewrap_candidate_get_one():
    settings = load_settings({})
    with reachable_folder("refbox-when") as root:
        scratch = root / "pkb-eval-when"
        scratch.mkdir(mode=0o711)
        jail = bubblewrap.Sandbox.start(scratch / "sandbox", scratch, *_ids())
        try:
            assert reference_box.for_evaluation(scratch, jail, "gloo", settings) is None
            assert reference_box.for_evaluation(scratch, object(), "nccl", settings) is None
            assert reference_box.for_evaluation(scratch, None, "nccl", settings) is None
            box = reference_box.for_evaluation(scratch, jail, "nccl", settings)
            assert box is not None
            try:
                # Beside the evaluation's folder, which the candidate's sandbox binds
                # read-write: never inside it.
                assert box.folder.parent == scratch.parent
                assert not box.folder.is_relative_to(scratch)
                assert (box.scratch.stat().st_uid, box.scratch.stat().st_gid) == _ids()
                assert box.folder.stat().st_mode & 0o777 == 0o711
            finally:
                box.close()
            assert not box.folder.exists()
        finally:
            jail.close()


def test_a_box_that_cannot_start_leaves_the_runner_outside_and_nothing_behind(caplog):
    with reachable_folder("refbox-fail") as root:
        scratch = root / "pkb-eval-fail"
        scratch.mkdir(mode=0o711)
        taken = root / "pkb-eval-fail-reference"
        taken.mkdir()
        (taken / "theirs").write_text("not the box's")
        assert reference_box.start(scratch, *_ids(), LIMITS) is None
        assert "outside a sandbox of its own" in caplog.text
        assert (taken / "theirs").read_text() == "not the box's"  # only what it made goes


def test_the_references_runner_starts_in_its_sandbox_as_the_candidates_would():
    with reachable_folder("refbox-pool") as root:
        scratch = root / "pkb-eval-pool"
        scratch.mkdir(mode=0o711)
        box = reference_box.start(scratch, *_ids(), LIMITS)
        assert box is not None
        pools = RankPools(
            world_size=1, backend="gloo", scratch=scratch, limits=LIMITS, reference_box=box
        )
        try:
            pools.ensure_started()
            runner = pools.reference.groups[0]  # its pid as this host sees it
            status = _status(runner)
            assert int(status["Uid"].split()[0]) == _ids()[0]
            # Filtered from exec (every thread, not only the one that asked), no new privileges.
            for tid in os.listdir(f"/proc/{runner}/task"):
                assert _status(int(tid))["Seccomp"] == "2", tid
            assert status["NoNewPrivs"] == "1"
            # Laid out as the candidate's runner is: without address-space randomisation.
            assert int(Path(f"/proc/{runner}/personality").read_text(), 16) & 0x0040000
            assert os.readlink(f"/proc/{runner}/ns/pid") != os.readlink("/proc/self/ns/pid")
            assert os.readlink(f"/proc/{runner}/ns/net") != os.readlink("/proc/self/ns/net")
            # The candidate's limits, but the CPU cap: trusted code must not die of it.
            assert _limit(runner, "Max open files") == "1024"
            assert _limit(runner, "Max cpu time") == "unlimited"
            assert box.holder in pools.protected  # the orphan sweep spares the box
        finally:
            pools.stop()
            box.close()
        assert not box.folder.exists()


def test_a_box_gives_the_reference_its_folder_and_limits_and_no_filter_of_its_own(tmp_path):
    """With a box, the launcher filters the runner and its folder holds the rendezvous and
    caches; without one, the runner starts plainly and filters itself."""
    plain = RankPools(world_size=1, backend="nccl", scratch=tmp_path, strays=lambda keep: [])
    ((setup,),) = plain._setups("reference", [()])
    assert setup.seccomp and setup.limits is None and setup.env == {}
    box = reference_box.ReferenceBox(
        box=None,  # type: ignore[arg-type]  # setup() reads only the folders and limits
        folder=tmp_path / "r",
        scratch=tmp_path / "r" / "runner",
        limits=Limits(open_files=1024),
    )
    boxed = box.setup(setup, generation=3)
    assert not boxed.seccomp and boxed.limits == Limits(open_files=1024)
    assert boxed.rendezvous == str(tmp_path / "r" / "runner" / "rendezvous-reference-3")
    assert boxed.env == {
        "HOME": str(tmp_path / "r" / "runner" / "home"),
        "TMPDIR": str(tmp_path / "r" / "runner" / "tmp"),
    }
    assert (boxed.rank, boxed.peers, boxed.cores) == (setup.rank, setup.peers, setup.cores)
