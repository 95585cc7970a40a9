"""Judge a bundle of test files with the whole evaluator on CPU ranks over gloo."""

from __future__ import annotations

import dataclasses
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from evaluator.contract import ProblemResult
from evaluator.host.profiles import get_profile
from evaluator.host.settings import Settings, load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from problems.spec import Problem
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import reachable_folder


def small_settings(secret: str, **changes: Any) -> Settings:
    """Settings of a small CPU evaluation for tests: one correctness trial and exactly the
    pairs asked, with `changes` (warm-up, calls, pairs, deadline...) on top."""
    base = load_settings({"PKB_SEED_SECRET": secret})
    return dataclasses.replace(base, trials=1, max_rounds=None, **changes)


def sleeping_solution(seconds: float) -> str:
    """The source of an honest all-reduce that sleeps `seconds` in each call first."""
    return f"""
import time
import torch.distributed as dist


def solution(x):
    time.sleep({seconds})
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


def judge_files(
    files: dict[str, str],
    catalog: dict[str, Problem],
    settings: Settings,
    name: str,
    world_size: int = 2,
    **options: Any,
) -> dict[str, ProblemResult]:
    """Each problem's result, by slug, in a scratch folder bundle code can reach;
    `options` go to evaluate_bundle (mode, profile_case, on_artifact...)."""
    return judge_files_and_environment(files, catalog, settings, name, world_size, **options)[0]


def judge_files_and_environment(
    files: dict[str, str],
    catalog: dict[str, Problem],
    settings: Settings,
    name: str,
    world_size: int = 2,
    **options: Any,
) -> tuple[dict[str, ProblemResult], dict[str, Any]]:
    """`judge_files`, with the environment the evaluation reported about its host."""
    with reachable_folder(name) as scratch_dir:
        results, environment = evaluate_bundle(
            read_bundle(f"{name}.zip", make_zip(files), known_slugs=catalog),
            slugs=list(catalog),
            profile=dataclasses.replace(get_profile("cpu"), world_size=world_size),
            settings=dataclasses.replace(settings, scratch_dir=scratch_dir),
            evaluation_id=name,
            problems=catalog,
            **options,
        )
    return {r.slug: r for r in results}, environment


def evaluate_elsewhere(**kwargs: Any) -> Any:
    """`evaluate_bundle(**kwargs)` in a process of its own, for tests that are not about
    the evaluating process: it makes itself a child subreaper for good (so that what bundle
    code detaches comes back to it), and a test process that became one collects the
    orphans of every later test (a killed worker's children), which red-team tests that
    look around the process tree would then find."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(evaluate_bundle, **kwargs).result()
