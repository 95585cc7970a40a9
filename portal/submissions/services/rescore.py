"""Stored results' speedups and intervals read again from their stored pairs of rounds, by
the evaluator's current rule (`evaluator.judge.stats.speedup_interval`), never re-judged.

When the rule changes (2026-11-26: crossover blocks and a nominal 99% interval, where each
case had the median of its pairs and a 95% interval), results judged before would keep
the old numbers beside new ones on the same board. Each run keeps its cases' pairs in
order (`cases[*].rounds`, net of the harness), which is all the rule reads: a case's
speedup and interval are recomputed from them, the run's from its cases as the evaluator
does (geometric means), and the result from its runs as re-runs do (`result_aggregate`).
A case without pairs (a failed one, or one from a host that kept none) keeps its numbers,
and a run with such a case keeps its own. The interval adds the run-level spread a host of
the submission's profile adds by default (`evaluator.host.settings.default_run_spread`;
2026-11-26: 2% on GPUs, none on CPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from evaluator.face import default_run_spread, geomean, get_profile, speedup_interval
from portal.submissions.models import ProblemResult, ResultRun
from portal.submissions.services.reruns import result_aggregate

INTERVAL = ("speedup", "speedup_low", "speedup_high")


@dataclass
class Rescored:
    runs: int = 0  # runs whose numbers changed
    results: int = 0  # results re-aggregated from such runs
    unchanged: int = 0  # runs read and left as they were


def rescore_all(*, dry_run: bool = False) -> Rescored:
    """Every passed run with pairs of rounds, read again; their results re-aggregated."""
    counts = Rescored()
    touched: set[int] = set()
    runs = ResultRun.objects.filter(status=ProblemResult.Status.PASSED).order_by("id")
    for run in runs.select_related("result__submission").iterator():
        numbers = rescored_run(run.cases, run_spread_of(run.result.submission.profile))
        if numbers is None or _same(numbers, run):
            counts.unchanged += 1
            continue
        counts.runs += 1
        touched.add(run.result_id)
        if not dry_run:
            ResultRun.objects.filter(pk=run.pk).update(**numbers)
    counts.results = len(touched)
    if not dry_run:
        for result in ProblemResult.objects.filter(pk__in=touched):
            with transaction.atomic():
                result_aggregate(result=result)
    return counts


def run_spread_of(profile: str) -> float:
    """The run-level spread of a profile's hosts by default (none for a profile no longer
    known: its results keep the pairs' own interval)."""
    try:
        return default_run_spread(get_profile(profile).backend)
    except KeyError:
        return 0.0


def rescored_run(cases: Any, run_spread: float = 0.0) -> dict[str, Any] | None:
    """The run's cases and its speedup and interval by the current rule; None where any
    case has no pairs to read (it keeps what it has)."""
    if not isinstance(cases, list) or not cases:
        return None
    read = [rescored_case(case, run_spread) for case in cases]
    new_cases = [case for case in read if case is not None]
    if len(new_cases) != len(read):
        return None
    numbers: dict[str, Any] = {"cases": new_cases}
    for name in INTERVAL:
        numbers[name] = geomean([case[name] for case in new_cases])
    # Geometric means of the ends and of the medians: rounding may cross by ulps.
    numbers["speedup_low"] = min(numbers["speedup_low"], numbers["speedup"])
    numbers["speedup_high"] = max(numbers["speedup_high"], numbers["speedup"])
    return numbers


def rescored_case(case: Any, run_spread: float = 0.0) -> dict[str, Any] | None:
    """One case with its speedup and interval from its pairs, in the order they ran; None
    where it has none that can be read (each pair's net times, both positive)."""
    if not isinstance(case, dict) or not isinstance(case.get("rounds"), list):
        return None
    ratios = []
    for pair in case["rounds"]:
        reference = _positive(pair.get("reference_us")) if isinstance(pair, dict) else None
        candidate = _positive(pair.get("candidate_us")) if isinstance(pair, dict) else None
        if reference is None or candidate is None:
            return None
        ratios.append(reference / candidate)
    if not ratios:
        return None
    speedup, low, high = speedup_interval(ratios, run_spread=run_spread)
    return {**case, "speedup": speedup, "speedup_low": low, "speedup_high": high}


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _same(numbers: dict[str, Any], run: ResultRun) -> bool:
    return all(
        getattr(run, name) is not None and math.isclose(numbers[name], getattr(run, name))
        for name in INTERVAL
    )
