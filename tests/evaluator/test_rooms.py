"""Outputs far larger than their inputs: the judge grows the rooms it gives the reference's
outputs (judge/rank.py, `reference_round`) and the candidate's rounds, whichever side goes
first, use rooms that hold them (gloo, world size 2); where only one rank's outputs
outgrow their rooms, every rank runs its round again (`anyone`)."""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

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


UNEVEN = 100  # rank 0's output: a hundred times its 1 KiB input, over the first 64 KiB room


def uneven(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out)
    return out.repeat(UNEVEN) if dist.get_rank() == 0 else out


UNEVEN_SOURCE = f"""
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out.repeat({UNEVEN}) if dist.get_rank() == 0 else out
"""


def test_a_room_short_on_one_rank_runs_the_round_again_on_every_rank():
    # Rank 0's reference needs a larger room, rank 1's does not: with rank 0 alone running
    # its round again, its runner's all-reduce waited for a peer that never came.
    problem = dataclasses.replace(attacks.problem("rt-uneven"), reference=uneven)
    settings = small_settings(
        "uneven-secret-0123456789", warmup=1, iters=4, rounds=2, problem_timeout_s=30
    )
    files = {"rt-uneven.py": UNEVEN_SOURCE}
    result = judge_files(files, {"rt-uneven": problem}, settings, "uneven")["rt-uneven"]
    assert result.status == ProblemStatus.PASSED, result.message + result.log
    assert [r["first"] for r in result.cases[0].rounds] == ["reference", "candidate"]
