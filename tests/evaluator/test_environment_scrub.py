"""Bundle code never sees the worker's environment: broker address, secrets, settings."""

from __future__ import annotations

import dataclasses

from evaluator.contract import ProblemStatus
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator import samples
from tests.evaluator.archives import make_zip

LOOKS_FOR_SECRETS = """
import os
import torch.distributed as dist

SECRETS = ("PKB_SEED_SECRET", "REDIS_URL", "DATABASE_URL", "PKB_TEST_CANARY")

def _visible():
    return [name for name in SECRETS if name in os.environ]

# The compile pass imports this file in a process of its own: it must fail there too.
if _visible():
    raise RuntimeError(f"visible at import: {_visible()}")

def solution(x):
    if _visible():
        raise RuntimeError(f"visible in the rank: {_visible()}")
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        raise RuntimeError("multicast variables are missing")
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


def test_bundle_code_sees_no_secret_of_the_worker(monkeypatch):
    for name, value in {
        "PKB_SEED_SECRET": "a-secret-of-the-worker-0123",
        "REDIS_URL": "redis://broker.internal:6379/0",
        "DATABASE_URL": "postgres://portal@db/prod",
        "PKB_TEST_CANARY": "1",
    }.items():
        monkeypatch.setenv(name, value)
    bundle = read_bundle(
        "b.zip", make_zip({"all-reduce.py": LOOKS_FOR_SECRETS}), known_slugs=samples.CATALOG
    )
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"}),
        trials=1,
        warmup=1,
        iters=2,
        rotation=1,
        problem_timeout_s=60,
    )
    results, _ = evaluate_bundle(
        bundle,
        slugs=["all-reduce"],
        profile=dataclasses.replace(get_profile("cpu"), world_size=2),
        settings=settings,
        evaluation_id="scrub-test",
        problems=samples.CATALOG,
    )
    assert results[0].status == ProblemStatus.PASSED, (results[0].message, results[0].log)
