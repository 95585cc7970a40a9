"""The evaluation's memory cgroup: on this machine's real hierarchy (tests/redteam/
test_sandbox_walls.py has the cap stopping two ranks), and on a cgroup v2 tree laid out in
a folder, where the worker must first move itself into a leaf."""

from __future__ import annotations

import os

import pytest

from evaluator.host import cgroups


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
