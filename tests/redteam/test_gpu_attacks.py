"""The red-team attacks on CUDA: run on a GPU host (`pytest -m gpu tests/redteam`).

- side-stream: the solution returns at once and leaves its work (a 20 ms spin and the
  all-reduce) on a side stream the current stream never waits for. The runner copies the
  output on the current stream right after the call (unfinished: a wrong answer when
  checked), and synchronises the whole device before it replies, so the spin is inside
  the judge's clock either way.
- timer-cuda-event on CUDA: replacing Event.elapsed_time is flagged and changes nothing.
- the attacks of tests/redteam/attacks.py on the judge's arena, pipe and clock, on NCCL,
  each followed by a correct solution that must pass on the same worker. On a host of one
  GPU they run one rank, where an attack that only skips the all-reduce skips nothing (it
  is the identity there): those need two ranks.
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
    # Its output was not ready when copied (a wrong answer); had it been, the runner's
    # final synchronise put the spin inside the judge's clock.
    if side.status == ProblemStatus.PASSED:
        assert side.cases[0].rounds[0]["candidate_gross_us"] >= SPIN_MS * 1000 * 0.5, side
    else:
        assert side.status == ProblemStatus.WRONG_ANSWER, side.message
    assert by_slug["rt-timer-cuda-event"].flags == [str(ResultFlag.TAMPERED)]
    assert by_slug["rt-after-side-stream"].status == ProblemStatus.PASSED


WRONG = (ProblemStatus.WRONG_ANSWER, [])
# On the arena, the pipe and the runner: caught at any number of ranks.
ANY_RANKS = {
    "lazy-output": WRONG,
    "zero-stride": WRONG,
    "sparse-output": WRONG,
    "meta-output": WRONG,
    "oversized-output": WRONG,
    "pipe-garbage": (ProblemStatus.RUNTIME_ERROR, [str(ResultFlag.TAMPERED)]),
    "harness-patch": (ProblemStatus.PASSED, [str(ResultFlag.TAMPERED)]),
    "detach-hook": (ProblemStatus.PASSED, [str(ResultFlag.TAMPERED)]),
}
# Answers made with no communication: wrong only where there is someone to talk to.
TWO_RANKS = {"seed-search": WRONG, "input-hook": WRONG, "frame-reader": WRONG}


def test_attacks_on_the_arena_pipe_and_runner_are_caught_on_nccl():
    by_slug = _each_then_an_honest_pass([*ANY_RANKS, "forged-reply"])
    for name, expected in ANY_RANKS.items():
        caught = by_slug[f"rt-{name}"]
        assert (caught.status, caught.flags) == expected, (name, caught.message)
    forged = by_slug["rt-forged-reply"]
    assert forged.status in (ProblemStatus.WRONG_ANSWER, ProblemStatus.RUNTIME_ERROR), forged


@pytest.mark.skipif(WORLD < 2, reason="an answer without communication is right on one rank")
def test_answers_made_without_the_peers_are_wrong_on_nccl():
    by_slug = _each_then_an_honest_pass(list(TWO_RANKS))
    for name, expected in TWO_RANKS.items():
        caught = by_slug[f"rt-{name}"]
        assert (caught.status, caught.flags) == expected, (name, caught.message)


def _each_then_an_honest_pass(names: list[str]) -> dict:
    files: dict[str, str] = {}
    for attack in attacks.ATTACKS:
        if attack.name in names:
            files[f"rt-{attack.name}.py"] = attack.source
            files[f"rt-after-{attack.name}.py"] = attacks.HONEST
    # Every timed call checked (timed_checks = iters): the verdict does not depend on the draw.
    by_slug = _judge(files, {"PKB_PROFILE": "h200x2"}, iters=6, rounds=3, timed_checks=6)
    for name in names:
        after = by_slug[f"rt-after-{name}"]
        assert after.status == ProblemStatus.PASSED and not after.flags, after.message
    return by_slug


def _judge(files: dict[str, str], env: dict[str, str], **settings: int) -> dict:
    """Each file's result, judged by the whole evaluator on this host's GPUs."""
    catalog = _catalog(files)
    bundle = read_bundle("gpu.zip", make_zip(files), known_slugs=catalog)
    chosen = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "gpu-redteam-secret-0123456789", **env}),
        trials=1,
        warmup=2,
        problem_timeout_s=120,
        max_rounds=None,  # exactly `rounds` pairs: these tests are about verdicts
        **settings,
    )
    results, environment = evaluate_bundle(
        bundle,
        slugs=list(catalog),
        profile=HardwareProfile("gpu-redteam", "test", "-", WORLD, backend="nccl", case_kind="dev"),
        settings=chosen,
        evaluation_id=str(uuid.uuid4()),
        problems=catalog,
    )
    # The attacks must meet the walls the host promises, not the fallback's.
    assert environment["sandbox"] == chosen.sandbox, environment
    return {r.slug: r for r in results}
