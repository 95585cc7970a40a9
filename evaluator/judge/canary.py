"""Same code judged against itself: the all-reduce reference as the candidate, through the
whole evaluator (pools, sandbox, the judges' clock), should read 1.00x.

A host whose reading strays from 1.00 cannot be trusted to rank anyone: the worker's
canary (`evaluator.host.canary`) runs this at start and then at an interval, and stops
taking work while it reads out of bounds. `evaluator.tools.floor --calibrate` judges the
same bundle at length, to measure.

    python -m evaluator.judge.canary --out reading.json [--tolerance 0.05] [--candidate F]

Judges with this host's settings (PKB_* environment) and profile, on few small cases: on
GPUs the all-reduce at a launch-bound and a bandwidth-bound size, on CPU two small ones,
so that a reading takes seconds. `--candidate` judges another solution's source against
the reference instead (a deliberately slowed copy shows what out of bounds looks like).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import math
import os
import sys
import time
import uuid
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluator.contract import CaseResult, ProblemStatus
from evaluator.host.profiles import HardwareProfile, get_profile
from evaluator.host.settings import Settings, load_settings
from evaluator.intake.bundle import Bundle, read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.pool import EvaluatorError
from evaluator.rank_process import NO_MULTICAST
from problems.collective import all_reduce
from problems.spec import Case, Problem

log = logging.getLogger(__name__)

# The candidate's whole source: the reference itself, imported as bundle code.
REFERENCE_SOURCE = "from problems.collective.all_reduce import solution  # noqa: F401\n"
SLUG = "canary-all-reduce"  # not the catalog's slug: private eval cases never resize it
# bf16 elements on GPUs: 128 MiB, bandwidth-bound (the size the links' bus bandwidth was
# measured at, docs/architecture.md). Not a launch-bound size: there the same code still
# reads up to 1.10x against itself on a sound H100 (a harness bias under study,
# docs/measurements/2026-11-25-repeatable-pairs.md), and a canary that tripped on it would
# take sound hosts out of service. On CPU one float32 case: a development host's reading
# must take seconds.
GPU_SIZES = (1 << 26,)
CPU_SIZES = (1 << 14,)
# Calls per round: on GPUs the evaluator's own (500 / 10); on CPU more than its 7, which
# left same-code medians of 0.47-1.46x on the shared 2-core machine, where 50 read
# 0.82-1.32x (load average 5, other test suites running, 2026-11-25).
CALLS_PER_ROUND = 50
# Pairs per case, at least: at 8 the judge's 95% interval is the pairs' range (coverage
# 99.2%), so a sound host reads outside it by chance less than once in a hundred.
LEAST_PAIRS = 8
# How far the median may stray from 1.00: GPUs read same code at bandwidth-bound sizes
# within 2% (docs/measurements/2026-11-25-repeatable-pairs.md). gloo ranks sharing two cores with
# other work stray by a third (above): a CPU host's canary catches gross faults only.
TOLERANCE = {"gloo": 0.5, "nccl": 0.05}
# Whether the interval must cover 1.00 too. On GPUs a bandwidth-bound pair's two rounds
# meet the same host, so the interval is honest and one that misses 1.00 is a fault. gloo
# ranks outnumbering a CPU host's cores busy-poll against each other: a whole reading's
# pairs can lean one way (all 8 of one reading at 1.03-1.57x on the 2-core CI machine,
# 2026-11-25), so there the median's tolerance alone decides.
COVER = {"gloo": False, "nccl": True}


def default_tolerance(backend: str) -> float:
    return TOLERANCE.get(backend, TOLERANCE["nccl"])


def needs_cover(backend: str) -> bool:
    return COVER.get(backend, True)


def all_reduce_problem(
    slug: str, reference: Callable[..., Any], sizes: tuple[int, ...], dtype: str = "bfloat16"
) -> Problem:
    """The all-reduce problem renamed, with `reference` and one case per size, dev and eval
    alike (so the profile's case kind does not matter)."""
    cases = tuple(Case(f"n={n}", dtype, {"n": n}) for n in sizes)
    # One rank too: a host of one GPU measures the harness's own cost (tools/floor.py).
    return dataclasses.replace(
        all_reduce.PROBLEM,
        slug=slug,
        reference=reference,
        dev_cases=cases,
        eval_cases=cases,
        world_sizes=(1, *all_reduce.PROBLEM.world_sizes),
    )


def bundle_of(sources: Mapping[str, str], problems: Mapping[str, Problem]) -> Bundle:
    """A bundle of `{slug: source}`, read and checked as an upload is."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for slug, source in sources.items():
            archive.writestr(f"{slug}.py", source)
    return read_bundle("canary.zip", buf.getvalue(), known_slugs=problems)


@dataclasses.dataclass(frozen=True)
class CaseReading:
    case: str
    median: float
    low: float
    high: float
    pairs: int

    def in_bounds(self, tolerance: float, cover: bool = True) -> bool:
        """Same code: the median is within `tolerance` of 1.00 and, with `cover`, the
        interval covers 1.00."""
        covered = self.low <= 1.0 <= self.high or not cover
        return covered and abs(self.median - 1.0) <= tolerance


@dataclasses.dataclass(frozen=True)
class Reading:
    """What the canary read: per case the median pair speedup and its interval."""

    cases: list[CaseReading]
    tolerance: float
    error: str = ""  # why there is no reading (the evaluator failed, the reference failed)
    wall_s: float = 0.0
    cover: bool = True  # the intervals must cover 1.00 (COVER)

    @property
    def in_bounds(self) -> bool:
        if self.error or not self.cases:
            return False
        return within_bounds(self.cases, self.tolerance, self.cover)

    def summary(self) -> str:
        if self.error:
            return f"no reading: {self.error}"
        return ", ".join(
            f"{c.case} {c.median:.2f}x ({c.low:.2f}-{c.high:.2f}, {c.pairs} pairs)"
            for c in self.cases
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "in_bounds": self.in_bounds,
            "tolerance": self.tolerance,
            "cover": self.cover,
            "error": self.error,
            "wall_s": round(self.wall_s, 1),
            "cases": [dataclasses.asdict(c) for c in self.cases],
        }


def within_bounds(cases: Sequence[CaseReading], tolerance: float, cover: bool = True) -> bool:
    return all(c.in_bounds(tolerance, cover) for c in cases)


def read_cases(results: Sequence[CaseResult]) -> tuple[list[CaseReading], str]:
    """The readings of judged cases, or why one cannot be read."""
    cases = []
    for c in results:
        values = (c.speedup, c.speedup_low, c.speedup_high)
        if not c.passed or any(v is None or not math.isfinite(v) for v in values):
            return [], f"case {c.case} has no speedup (passed: {c.passed})"
        median, low, high = (float(v) for v in values if v is not None)
        cases.append(CaseReading(c.case, median, low, high, len(c.rounds)))
    return cases, ""


def canary_settings(settings: Settings) -> Settings:
    """The host's settings, with one correctness trial and CALLS_PER_ROUND calls a round."""
    pairs = max(settings.rounds, LEAST_PAIRS)
    return dataclasses.replace(settings, trials=1, rounds=pairs, iters=pairs * CALLS_PER_ROUND)


def judge_same_code(
    *,
    profile: HardwareProfile,
    settings: Settings,
    tolerance: float | None = None,
    candidate_source: str = REFERENCE_SOURCE,
) -> Reading:
    """Judge `candidate_source` (the reference itself by default) against the all-reduce
    reference on this host. Never raises for a broken host: the reading says why."""
    tolerance = default_tolerance(profile.backend) if tolerance is None else tolerance
    cover = needs_cover(profile.backend)
    sizes, dtype = (CPU_SIZES, "float32") if profile.backend == "gloo" else (GPU_SIZES, "bfloat16")
    problem = all_reduce_problem(SLUG, all_reduce.solution, sizes, dtype)
    problems = {SLUG: problem}
    began = time.monotonic()
    try:
        results, _ = evaluate_bundle(
            bundle_of({SLUG: candidate_source}, problems),
            slugs=[SLUG],
            profile=profile,
            settings=canary_settings(settings),
            evaluation_id=f"canary-{uuid.uuid4()}",
            problems=problems,
        )
    except EvaluatorError as exc:
        return Reading([], tolerance, error=f"the evaluator failed: {exc}", cover=cover)
    wall_s = time.monotonic() - began
    [result] = results
    if result.status != ProblemStatus.PASSED:
        why = f"the reference did not pass against itself: {result.status}: {result.message}"
        return Reading([], tolerance, error=why[:500], wall_s=wall_s, cover=cover)
    cases, error = read_cases(result.cases)
    return Reading(cases, tolerance, error=error, wall_s=wall_s, cover=cover)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluator.judge.canary",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="the reading, as JSON")
    parser.add_argument("--tolerance", type=float, default=None, help="of the median")
    parser.add_argument("--candidate", type=Path, default=None, help="another solution's source")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    os.environ.update(NO_MULTICAST)
    settings = load_settings()
    source = args.candidate.read_text() if args.candidate else REFERENCE_SOURCE
    reading = judge_same_code(
        profile=get_profile(settings.profile),
        settings=settings,
        tolerance=args.tolerance,
        candidate_source=source,
    )
    # Whole or not at all: the worker reads the file once this process has exited.
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_text(json.dumps(reading.to_json()))
    partial.replace(args.out)
    bounds = "in bounds" if reading.in_bounds else "OUT OF BOUNDS"
    print(f"same code on {settings.profile}: {reading.summary()}: {bounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
