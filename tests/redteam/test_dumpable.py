"""Every runner is non-dumpable, the candidate's as the reference's (rank_process.start): the
kernel may charge a switch into a non-dumpable task (a branch-predictor barrier), and a
candidate that escaped it would read faster than the same code. One that makes itself
dumpable again is flagged by the runner's tripwire (gloo, world size 2)."""

from __future__ import annotations

import dataclasses

from evaluator.contract import ProblemStatus, ResultFlag
from evaluator.host.settings import load_settings
from tests.evaluator.judging import judge_files
from tests.redteam import attacks

DUMPABLE_AGAIN = """
import ctypes
import torch.distributed as dist
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

REPORTS = """
import ctypes
import torch.distributed as dist

def solution(x):
    if ctypes.CDLL(None).prctl(3, 0, 0, 0, 0):  # PR_GET_DUMPABLE
        raise RuntimeError("this runner is dumpable")
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


def test_a_runner_made_dumpable_again_is_flagged_and_the_next_is_not():
    files = {"rt-dumpable.py": DUMPABLE_AGAIN, "rt-reports.py": REPORTS}
    catalog = {slug: attacks.problem(slug) for slug in ("rt-dumpable", "rt-reports")}
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "dumpable-secret-0123456789"}),
        trials=1,
        warmup=1,
        iters=2,
        rounds=1,
        problem_timeout_s=30,
    )
    results = judge_files(files, catalog, settings, "dumpable")
    again, reports = results["rt-dumpable"], results["rt-reports"]
    assert again.status == ProblemStatus.PASSED, again.message
    assert again.flags == [str(ResultFlag.TAMPERED)]
    assert "prctl.PR_SET_DUMPABLE" in again.message
    # Restarted after the flag: the next candidate starts non-dumpable again.
    assert reports.status == ProblemStatus.PASSED, reports.message + reports.log
    assert not reports.flags
