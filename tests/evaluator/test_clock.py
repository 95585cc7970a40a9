"""The trusted clock tells time spent in the calls from time the reported calls leave out,
on real gloo rank processes: about the same sleep per round (1.8 s, 1.5 s), once inside
the calls (an honest slow solution: reported, not flagged) and once while the harness
makes the inputs (tests/redteam/attacks.py's sleeper: flagged `clock_mismatch`)."""

from __future__ import annotations

import dataclasses

from evaluator.contract import ProblemStatus, ResultFlag
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import reachable_folder
from tests.redteam import attacks

SLOW = """
import time
import torch.distributed as dist

def solution(x):
    time.sleep(0.6)
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


def test_time_inside_the_calls_is_reported_and_time_outside_them_is_flagged():
    sleeper = next(a for a in attacks.ATTACKS if a.name == "sleeper")
    files = {"rt-slow.py": SLOW, "rt-sleeper.py": sleeper.source}
    catalog = {slug: attacks.problem(slug) for slug in ("rt-slow", "rt-sleeper")}
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "clock-secret-0123456789"}),
        trials=1,
        warmup=2,
        iters=2,
        rounds=2,
        timed_checks=2,
        problem_timeout_s=30,
        # Well below the sleep of a round (1.8 s in the calls, 1.5 s around them), well
        # above the harness's own work even on a loaded machine.
        clock_margin_s=0.5,
    )
    with reachable_folder("clock") as scratch_dir:
        results, _ = evaluate_bundle(
            read_bundle("clock.zip", make_zip(files), known_slugs=catalog),
            slugs=list(catalog),
            profile=dataclasses.replace(get_profile("cpu"), world_size=2),
            settings=dataclasses.replace(settings, scratch_dir=scratch_dir),
            evaluation_id="clock",
            problems=catalog,
        )
    slow, sleeper_result = results
    assert slow.status == ProblemStatus.PASSED and not slow.flags, slow.message
    assert len(slow.cases[0].rounds) == 2
    assert all(r["candidate_us"] >= 600_000 for r in slow.cases[0].rounds)
    assert slow.speedup < 0.1
    assert sleeper_result.flags == [str(ResultFlag.CLOCK_MISMATCH)], sleeper_result.message
    # It reported the calls it made honestly: short ones, right outputs.
    assert sleeper_result.status == ProblemStatus.PASSED
    assert sleeper_result.cases[0].rounds[0]["candidate_us"] < 100_000
