"""Outputs far larger than their inputs: the judge grows the rooms it gives the reference's
outputs (judge/rank.py, `reference_round`) and the candidate's rounds, whichever side goes
first, use rooms that hold them (gloo, world size 2)."""

from __future__ import annotations

import dataclasses

import torch

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

REPEATS = 1024  # 256 float32 elements in, 1 MiB out: sixteen times the smallest room


def repeated(x: torch.Tensor) -> torch.Tensor:
    return x.repeat(REPEATS)


SOURCE = f"""
def solution(x):
    return x.repeat({REPEATS})
"""


def test_rooms_grow_to_outputs_larger_than_the_first_room():
    problem = dataclasses.replace(attacks.problem("rt-grows"), reference=repeated)
    settings = small_settings(
        "rooms-secret-0123456789",
        warmup=1,
        iters=4,
        rounds=2,
        timed_checks=4,
        problem_timeout_s=30,
    )
    result = judge_files({"rt-grows.py": SOURCE}, {"rt-grows": problem}, settings, "rooms")
    grows = result["rt-grows"]
    assert grows.status == ProblemStatus.PASSED, grows.message + grows.log
    assert [r["first"] for r in grows.cases[0].rounds] == ["reference", "candidate"]
    assert grows.cases[0].max_abs_err == 0.0
