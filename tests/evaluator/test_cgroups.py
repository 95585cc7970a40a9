"""The evaluation's memory cgroup: on this machine's real hierarchy (tests/redteam/
test_sandbox_walls.py has the cap stopping two ranks), and on a cgroup v2 tree laid out in
a folder, where the worker must first move itself into a leaf."""

from __future__ import annotations

import functools
import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from evaluator.host import cgroups
from evaluator.judge.rank_pool import RankPool
from tests.evaluator.scratch import host_freezers


def test_a_v2_cgroup_moves_the_worker_to_a_leaf_and_caps_the_evaluation(tmp_path, monkeypatch):
    base = tmp_path / "system.slice" / "pkb-worker@h200x2-0.service"
    base.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text("\n")
    (base / "cgroup.procs").write_text(f"{os.getpid()}\n")
    table = tmp_path / "self-cgroup"
    table.write_text("0::/system.slice/pkb-worker@h200x2-0.service\n")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "_own_groups", lambda: cgroups._parse(table))
    group = cgroups.EvaluationCgroup.create("pkb-eval-1", 3 << 30)
    assert group.version == 2 and group.path == base / "pkb-eval-1"
    assert (base / "pkb-worker" / "cgroup.procs").read_text() == str(os.getpid())
    assert (base / "cgroup.subtree_control").read_text() == "+memory"
    assert (group.path / "memory.max").read_text() == str(3 << 30)
    assert group.procs == group.path / "cgroup.procs"


def test_a_host_without_a_memory_controller_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    with pytest.raises(cgroups.CgroupError, match="no memory controller"):
        cgroups.EvaluationCgroup.create("pkb-eval-2", 1 << 30)


def test_the_hosts_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684136 kB\nMemFree:        1 kB\n")
    assert cgroups.host_memory_mb(str(meminfo)) == 24105
    assert cgroups.host_memory_mb(str(tmp_path / "absent")) == 0


def test_on_cgroup_v2_the_candidates_ranks_freeze_inside_the_cap_the_references_beside_it(
    tmp_path,
):
    memory = cgroups.EvaluationCgroup(tmp_path / "pkb-eval-3", 2)
    memory.path.mkdir()
    freezers = cgroups.Freezers.create("pkb-eval-3", 2, memory)
    assert freezers.paths == {
        "reference": [tmp_path / "pkb-eval-3-reference" / f"reference-{r}" for r in (0, 1)],
        "candidate": [memory.path / f"candidate-{r}" for r in (0, 1)],
    }
    rank = freezers.paths["candidate"][1]
    (rank / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    # Asked, not yet done: the kernel says so in cgroup.events.
    assert not cgroups.set_frozen(rank, True, timeout_s=0.01)
    assert (rank / "cgroup.freeze").read_text() == "1"
    (rank / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    assert cgroups.set_frozen(rank, True, timeout_s=0.01)


SPINS = """
import sys, time
with open(sys.argv[1], "ab", buffering=0) as f:
    while True:
        f.write(b".")
        time.sleep(0.005)
"""


def _grows(path, within_s: float = 5.0) -> bool:
    size, end = path.stat().st_size if path.exists() else 0, time.monotonic() + within_s
    while time.monotonic() < end:
        if path.exists() and path.stat().st_size > size:
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def freezers():
    """On this machine's own hierarchy (v1's freezer, or v2 under a memory cgroup)."""
    with host_freezers(f"pkb-test-{os.getpid()}") as made:
        if made is None:
            pytest.skip("this host gives no freezer (root, and cgroup v1's freezer or v2)")
        yield made


def test_a_frozen_rank_stands_still_out_of_any_process_group_and_dies_when_closed(
    tmp_path, freezers
):
    rank = freezers.paths["candidate"][0]
    marks = tmp_path / "marks"
    spinner = subprocess.Popen([sys.executable, "-c", SPINS, str(marks)], start_new_session=True)
    try:
        freezers.add("candidate", 0, [spinner.pid])
        assert _grows(marks)
        assert cgroups.set_frozen(rank, True, timeout_s=1.0)
        assert not _grows(marks, within_s=0.3)
        freezers.thaw("candidate")
        assert _grows(marks)
        # Killed while frozen: closing thaws it first, so it dies and the cgroups go.
        assert cgroups.set_frozen(rank, True, timeout_s=1.0)
        spinner.kill()
        freezers.close()
        assert spinner.wait(timeout=5) != 0
        assert not [path for path in [*freezers.tops, rank] if path.exists()]
    finally:
        spinner.kill()
        spinner.wait()


def test_a_killed_workers_evaluation_cgroups_go_with_their_ranks_an_hour_on(tmp_path):
    old, fresh = tmp_path / "pkb-eval-old", tmp_path / "pkb-eval-fresh"
    for group in (old, fresh):
        (group / "reference-0").mkdir(parents=True)
        (group / "candidate-0").mkdir()
    hour_ago = time.time() - cgroups.STALE_S - 60
    os.utime(old, (hour_ago, hour_ago))
    cgroups._remove_stale(tmp_path)
    assert not old.exists()
    assert (fresh / "candidate-0").is_dir()


def _sleeps(conn) -> None:
    time.sleep(3600)


def test_a_pool_kills_its_ranks_while_their_freezer_holds_them_frozen(freezers):
    pool = RankPool("candidate", 1)
    pool.thaw = functools.partial(freezers.thaw, "candidate")
    pool.launch(multiprocessing.get_context("spawn"), _sleeps, [()])
    proc = pool.procs[0]
    freezers.add("candidate", 0, [proc.pid])
    assert cgroups.set_frozen(freezers.paths["candidate"][0], True, timeout_s=1.0)
    began = time.monotonic()
    pool.kill()
    assert time.monotonic() - began < 2.0
    assert not proc.is_alive()


def test_a_dead_workers_frozen_v1_freezers_are_thawed_a_live_ones_kept(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    dead = tmp_path / f"pkb-eval-a{cgroups.OWNER}{gone.pid}"
    live = tmp_path / f"pkb-eval-b{cgroups.OWNER}{os.getpid()}"
    for top in (dead, live):
        (top / "reference-0").mkdir(parents=True)
        (top / "reference-0" / "freezer.state").write_text("FROZEN")
    cgroups.thaw_abandoned(tmp_path)
    # Thawed (on a real cgroup file system the folders then go: rmdir; here they hold files).
    assert (dead / "reference-0" / "freezer.state").read_text() == "THAWED"
    assert (live / "reference-0" / "freezer.state").read_text() == "FROZEN"
