"""Processes bundle code forks to steal the CPU while the reference is timed (gloo, world
size 2, on the test machine's cores). Each judge freezes the cgroup of every process of
its candidate's rank while the reference's rounds run (judge/processes.py, `frozen`;
host/cgroups.py, `Freezers`), and no judge thaws it before every rank's side has ended
(judge/turns.py): a
hog that spins only while its candidate is idle (that is, while the reference is being
timed) stands still exactly then, on every rank, in the runner's process group or in a
session of its own.

The test looks at that directly, not at speedups: the hogs note when they spin, the
reference notes each call's start and end, and no note of a hog may fall inside a call.
On the test machine's two shared cores the honest code reads 0.46-1.08x against itself
from one run to the next (12 pairs, 2026-11-26), so a hog's gain held against it could
only be asked loosely, and such a test both passed with the cross-rank window below open
and failed, once in CI, with hogs that had gained nothing."""

from __future__ import annotations

import dataclasses
import functools
import struct
import time
from pathlib import Path

import pytest
import torch

from evaluator.contract import ProblemStatus
from problems.collective import all_reduce
from tests.evaluator.judging import judge_files, small_settings
from tests.evaluator.scratch import freezes_here, reachable_folder
from tests.redteam import attacks

HOGS = 2  # per rank: with two ranks, more than the machine's two cores
LAG_S = 0.03  # rank 1's reference, after each call's all-reduce

# Each hog notes the time about every quarter millisecond it spins, into a file of its own.
HOGGING = """
import mmap, os, struct, time
import torch.distributed as dist

LAST_CALL = mmap.mmap(-1, 8)  # shared with the forked hogs


def _hog(path):
    with open(path, "ab", buffering=0) as notes:
        while True:
            idle = time.monotonic() - struct.unpack("d", LAST_CALL[:8])[0]
            if idle > 0.002:  # the candidate is not running: the reference is being timed
                now = time.monotonic()
                end, note = now + 0.002, now
                while now < end:
                    if now >= note:
                        notes.write(struct.pack("d", now))
                        note = now + 0.00025
                    now = time.monotonic()
            else:
                time.sleep(0.0005)


for _ in range({hogs}):
    if os.fork() == 0:
        try:
            if {leave}:
                os.setsid()  # out of the runner's process group, not out of its cgroup
            _hog(os.path.join({notes!r}, f"spins.{{os.getpid()}}"))
        finally:
            os._exit(0)


def solution(x):
    LAST_CALL[:8] = struct.pack("d", time.monotonic())
    out = x.clone()
    dist.all_reduce(out)
    LAST_CALL[:8] = struct.pack("d", time.monotonic())
    return out
"""


def lagging_reference(x: torch.Tensor, *, path: str) -> torch.Tensor:
    """The all-reduce reference, rank 1's slower after each call's collective, each call's
    start and end noted: rank 0's side of every pair ends first, by LAG_S. A judge that
    continued its candidate as its own side ended would let rank 0's hogs spin inside rank
    1's last call of every round."""
    rank = torch.distributed.get_rank()
    start = time.monotonic()
    out = all_reduce.solution(x)
    if rank == 1:
        time.sleep(LAG_S)
    with open(f"{path}.{rank}", "ab") as f:
        f.write(struct.pack("dd", start, time.monotonic()))
    return out


def _floats(path: Path) -> list[float]:
    data = path.read_bytes()
    return [t for (t,) in struct.iter_unpack("d", data[: len(data) // 8 * 8])]


def _calls(windows: Path, ranks: int) -> list[tuple[float, float]]:
    found = []
    for rank in range(ranks):
        stamps = _floats(windows.with_suffix(f".{rank}"))
        found += list(zip(stamps[::2], stamps[1::2], strict=True))
    return found


@pytest.mark.parametrize("leave", [False, True], ids=["in-the-group", "own-session"])
def test_no_hog_of_any_candidate_spins_while_any_rank_times_the_reference(tmp_path, leave):
    if not freezes_here():
        pytest.skip("this host gives no freezer: hogs run (docs/security.md)")
    windows = tmp_path / "calls"
    reference = functools.partial(lagging_reference, path=str(windows))
    problem = dataclasses.replace(attacks.problem("rt-hogging"), reference=reference)
    catalog = {"rt-hogging": problem}
    warmup, calls, pairs = 2, 6, 3
    with reachable_folder("hog-notes", candidates_write=True) as notes:
        settings = small_settings(
            "hog-secret-0123456789",
            warmup=warmup,
            iters=calls * pairs,
            rounds=pairs,
            problem_timeout_s=60,
            sandbox_shared=(notes,),
        )
        source = HOGGING.format(notes=str(notes), hogs=HOGS, leave=leave)
        result = judge_files({"rt-hogging.py": source}, catalog, settings, "hog")["rt-hogging"]
        spins = sorted(t for path in notes.glob("spins.*") for t in _floats(path))
    assert result.status == ProblemStatus.PASSED, result.message
    # They spun (between pairs, while the judges check and report), just never then:
    assert len(spins) > 100, "the hogs never spun"
    reference_calls = _calls(windows, ranks=2)
    # Every pair's warm-up and timed rounds on both ranks, and the correctness trial's.
    assert len(reference_calls) >= 2 * pairs * (warmup + calls)
    inside = [t for t in spins for start, end in reference_calls if start < t < end]
    assert not inside, f"{len(inside)} notes of spinning hogs inside the reference's calls"
