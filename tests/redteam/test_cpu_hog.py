"""Processes bundle code forks to steal the CPU while the reference is timed (gloo, world
size 2, on the test machine's cores). Each judge stops its candidate runner's process
group while the reference's rounds run (judge/processes.py, `stopped`), so a hog that
spins only while its candidate is idle (that is, while the reference is being timed)
stands still exactly then: the honest code beside it reads about what it reads alone, not
the 4-6x such hogs gave before."""

from __future__ import annotations

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

HOGS = 2  # per rank: with two ranks, more than the machine's two cores

HOGGING = f"""
import mmap, os, struct, time
import torch.distributed as dist

LAST_CALL = mmap.mmap(-1, 8)  # shared with the forked hogs


def _hog():
    while True:
        idle = time.monotonic() - struct.unpack("d", LAST_CALL[:8])[0]
        if idle > 0.002:  # the candidate is not running: the reference is being timed
            end = time.monotonic() + 0.002
            while time.monotonic() < end:
                pass
        else:
            time.sleep(0.0005)


for _ in range({HOGS}):
    if os.fork() == 0:
        try:
            _hog()
        finally:
            os._exit(0)


def solution(x):
    LAST_CALL[:8] = struct.pack("d", time.monotonic())
    out = x.clone()
    dist.all_reduce(out)
    LAST_CALL[:8] = struct.pack("d", time.monotonic())
    return out
"""


def test_a_hog_that_spins_while_the_reference_is_timed_gains_nothing():
    catalog = {slug: attacks.problem(slug) for slug in ("rt-honest", "rt-hogging")}
    settings = small_settings(
        "hog-secret-0123456789",
        warmup=2,
        # 12 pairs of 10 calls: with 6, one CI run read the honest code itself at 1.38x
        # and the hogs at 2.67x (single pairs range 0.3-4x on two shared cores), where 7
        # runs here read both below 1.0.
        iters=120,
        rounds=12,
        problem_timeout_s=60,
    )
    files = {"rt-honest.py": attacks.HONEST, "rt-hogging.py": HOGGING}
    results = judge_files(files, catalog, settings, "hog")
    honest, hogging = results["rt-honest"], results["rt-hogging"]
    assert honest.status == hogging.status == ProblemStatus.PASSED, hogging.message
    # Same code both times; the hogs' only effect left is on the candidate's own rounds.
    # Without the stop these hogs read about 3x the honest speedup here (0.61 -> 1.79x,
    # 0.67 -> 2.00x, 2026-11-25); the issue's own read 4-6.5x.
    assert hogging.speedup < max(1.5, 1.5 * honest.speedup), (honest.speedup, hogging.speedup)
