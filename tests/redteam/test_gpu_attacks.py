"""Attacks that need CUDA: run on a GPU host (`pytest -m gpu tests/redteam`).

- side-stream: the solution returns at once and leaves its work (a 20 ms spin and the
  all-reduce) on a side stream the current stream never waits for. Defence: the harness
  copies each output on the current stream right after the call, so the
  unfinished output is what the judge checks (a wrong answer); the batch's final device
  synchronise puts the spin inside the parent's own clock.
- timer-cuda-event on CUDA: replacing Event.elapsed_time is flagged and changes nothing.
- own-loop, ctypes-clock, fill-after-loop, sleeper (tests/redteam/attacks.py) on NCCL:
  commit-then-reveal and the trusted clock catch them on GPUs too, and a correct solution
  passes right after each on the same worker. On a host of one GPU these run one rank,
  where the two attacks that skip the all-reduce skip nothing (it is the identity), so
  only the clock's half runs there.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import torch

from evaluator.contract import ProblemStatus, ResultFlag
from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator.archives import make_zip
from tests.redteam import attacks

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 1, reason="needs CUDA GPUs")]
# Two ranks where the host has them; one on a host of one GPU (the attacks are on the
# judge's process and clock, which one rank exercises as well; NCCL runs with one rank).
WORLD = min(GPUS, 2)


def _catalog(files: dict[str, str]) -> dict:
    return {
        slug: dataclasses.replace(attacks.problem(slug), world_sizes=(1, 2, 4, 8))
        for slug in (f[:-3] for f in files)
    }


SPIN_MS = 20
SIDE_STREAM = f"""
import torch
import torch.distributed as dist

SIDE = {{}}

def solution(x):
    side = SIDE.setdefault("s", torch.cuda.Stream())
    out = torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(int({SPIN_MS} * 1e-3 * 1.4e9))  # about {SPIN_MS} ms of GPU cycles
        out.copy_(x)
        dist.all_reduce(out)
    return out
"""


def test_side_stream_work_is_inside_the_timed_interval():
    timer = next(a for a in attacks.ATTACKS if a.name == "timer-cuda-event")
    files = {
        "rt-side-stream.py": SIDE_STREAM,
        "rt-timer-cuda-event.py": timer.source,
        "rt-after-side-stream.py": attacks.HONEST,
    }
    by_slug = _judge(files, {}, iters=5)
    side = by_slug["rt-side-stream"]
    # Its output was not ready when copied (a wrong answer); had it been, the parent's
    # clock saw the spin that the reported times do not hold.
    if side.status == ProblemStatus.PASSED:
        timed_in_full = side.cases[0].time_us >= SPIN_MS * 1000 * 0.5
        assert timed_in_full or str(ResultFlag.CLOCK_MISMATCH) in side.flags, side
    else:
        assert side.status == ProblemStatus.WRONG_ANSWER, side.message
    assert by_slug["rt-timer-cuda-event"].flags == [str(ResultFlag.TAMPERED)]
    assert by_slug["rt-after-side-stream"].status == ProblemStatus.PASSED


# Skipping the all-reduce is no cheat on one rank (it is the identity there): commit, then
# reveal needs two ranks to show. The trusted clock holds on any number.
COMMIT = {
    "own-loop": (ProblemStatus.WRONG_ANSWER, ResultFlag.TAMPERED),
    "fill-after-loop": (ProblemStatus.WRONG_ANSWER, ResultFlag.TAMPERED),
}
CLOCK = {
    "ctypes-clock": (ProblemStatus.PASSED, ResultFlag.CLOCK_MISMATCH),
    "sleeper": (ProblemStatus.PASSED, ResultFlag.CLOCK_MISMATCH),
}


@pytest.mark.skipif(WORLD < 2, reason="skipped work is caught only where it changes outputs")
def test_commit_then_reveal_holds_on_nccl():
    _each_caught_then_an_honest_pass(COMMIT)


def test_the_trusted_clock_holds_on_nccl():
    _each_caught_then_an_honest_pass(CLOCK)


def _each_caught_then_an_honest_pass(expected: dict) -> None:
    files: dict[str, str] = {}
    for attack in attacks.ATTACKS:
        if attack.name in expected:
            files[f"rt-{attack.name}.py"] = attack.source
            files[f"rt-after-{attack.name}.py"] = attacks.HONEST
    # Every timed call checked (timed_checks = iters): the verdict does not depend on the draw.
    by_slug = _judge(files, {"PKB_PROFILE": "h200x2"}, iters=6, rounds=3, timed_checks=6)
    for name, (status, flag) in expected.items():
        caught = by_slug[f"rt-{name}"]
        assert (caught.status, caught.flags) == (status, [str(flag)]), caught.message
        after = by_slug[f"rt-after-{name}"]
        assert after.status == ProblemStatus.PASSED and not after.flags, after.message


def _judge(files: dict[str, str], env: dict[str, str], **settings: int) -> dict:
    """Each file's result, judged by the whole evaluator on this host's GPUs."""
    catalog = _catalog(files)
    bundle = read_bundle("gpu.zip", make_zip(files), known_slugs=catalog)
    results, _ = evaluate_bundle(
        bundle,
        slugs=list(catalog),
        profile=HardwareProfile("gpu-redteam", "test", "-", WORLD, backend="nccl", case_kind="dev"),
        settings=dataclasses.replace(
            load_settings({"PKB_SEED_SECRET": "gpu-redteam-secret-0123456789", **env}),
            trials=1,
            warmup=2,
            problem_timeout_s=120,
            **settings,
        ),
        evaluation_id=str(uuid.uuid4()),
        problems=catalog,
    )
    return {r.slug: r for r in results}
