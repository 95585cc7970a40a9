"""What the reference takes per case on each hardware profile, and the links' bound.

Two sources, the newer first: reference times recorded with judged results in the database
(each evaluation times the reference beside the candidate, so every judged run is a
measurement), and the committed bench tables of the whole catalog (docs/measurements/,
`python -m evaluator.tools.references`), read where the case's sizes still match. The
roofline's bound is the bytes one rank must move over the profile's measured peer
bandwidth; CPU hosts measure none, so they have no bound.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluator.face import PROFILES, HardwareProfile
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission

# Profile -> bench table of every reference at the demo eval cases (docs/measurements).
# Profile -> (table, the date it was taken): each profile's newest whole-catalog table.
BENCH_TABLES = {
    "h200x2": ("docs/measurements/2026-11-28-references-h200x2.json", "2026-11-28"),
    "h200x4": ("docs/measurements/2026-11-22-references-h200x4.json", "2026-11-22"),
}
# The newest judged results read per problem: enough for a stable median, bounded work.
RECENT_RESULTS = 200


@dataclass
class CaseTiming:
    name: str
    dtype: str
    params: dict[str, Any]
    bytes_moved: int | None  # per rank at the profile's world size
    ref_us: float | None = None
    source: str = ""  # "3 judged runs", "bench 2026-11-22"
    floor_us: float | None = None

    @property
    def ref_gbps(self) -> float | None:
        """The bandwidth the reference reaches: its bytes over its time."""
        if not self.bytes_moved or not self.ref_us:
            return None
        return self.bytes_moved / self.ref_us / 1e3


@dataclass
class ProfileTimings:
    profile: HardwareProfile
    bandwidth_gbps: float | None  # measured peer bandwidth: the roofline's denominator
    cases: list[CaseTiming] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        return any(c.ref_us is not None for c in self.cases)


@cache
def _bench_table(path: str) -> dict[str, Any]:
    try:
        return json.loads((Path(settings.BASE_DIR) / path).read_text())
    except (OSError, ValueError):
        return {}


def _bench_rows(problem: Problem, profile: str) -> tuple[float | None, dict[str, dict]]:
    """The table's bandwidth and its rows for the problem whose sizes are today's."""
    table = _bench_table(BENCH_TABLES[profile][0]) if profile in BENCH_TABLES else {}
    today = {(c["name"], c["dtype"]): c["params"] for c in problem.demo_cases}
    rows = {
        row["case"]: row
        for row in table.get("rows", [])
        if row.get("slug") == problem.slug
        and row.get("median_us")
        and today.get((row["case"], row["dtype"])) == row.get("params")
    }
    return table.get("peer_bandwidth_gbps"), rows


def _judged(problem: Problem) -> dict[str, dict[str, list[dict]]]:
    """profile -> case name -> the recorded case rows of the newest judged results."""
    results = (
        ProblemResult.objects.filter(
            problem=problem,
            problem_version=problem.version,
            submission__status=Submission.Status.DONE,
            # Ranked runs only: a profile run's times are taken under the profiler, a test
            # run has none, and every published number comes from ranked runs.
            submission__mode=Submission.Mode.RANKED,
        )
        .exclude(ref_time_us=None)
        .order_by("-id")
        .values_list("submission__profile", "cases")[:RECENT_RESULTS]
    )
    found: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for profile, cases in results:
        for case in cases or []:
            if isinstance(case, dict) and case.get("ref_time_us"):
                found[profile][str(case.get("case"))].append(case)
    return found


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _judged_bandwidth(cases: dict[str, list[dict]]) -> float | None:
    """The hosts' peer bandwidth, from the floor they computed: bytes / floor."""
    rates = [
        c["bytes_moved"] / c["floor_us"] / 1e3
        for rows in cases.values()
        for c in rows
        if c.get("floor_us") and c.get("bytes_moved")
    ]
    return _median(rates)


def _case_list(problem: Problem, profile: HardwareProfile) -> list[CaseTiming]:
    if profile.case_kind == "dev":
        return [CaseTiming(c["name"], c["dtype"], c["params"], None) for c in problem.public_cases]
    size = str(profile.world_size)
    return [
        CaseTiming(c["name"], c["dtype"], c["params"], c.get("bytes_moved", {}).get(size))
        for c in problem.demo_cases
    ]


def _profile_timings(
    problem: Problem, profile: HardwareProfile, judged: dict[str, list[dict]]
) -> ProfileTimings:
    bench_bandwidth, bench = _bench_rows(problem, profile.name)
    bandwidth = _judged_bandwidth(judged) or bench_bandwidth
    timings = ProfileTimings(profile, bandwidth if profile.backend != "gloo" else None)
    for case in _case_list(problem, profile):
        runs = [float(c["ref_time_us"]) for c in judged.get(case.name, [])]
        if runs:
            case.ref_us, case.source = (
                _median(runs),
                f"{len(runs)} judged run{'s' if len(runs) > 1 else ''}",
            )
        elif case.name in bench:
            case.ref_us, case.source = (
                float(bench[case.name]["median_us"]),
                f"bench {BENCH_TABLES[profile.name][1]}",
            )
        if timings.bandwidth_gbps and case.bytes_moved is not None:
            case.floor_us = case.bytes_moved / timings.bandwidth_gbps / 1e3
        timings.cases.append(case)
    return timings


def reference_timings(problem: Problem) -> list[ProfileTimings]:
    """Per hardware profile the problem runs on: its cases with the reference's time where
    some source measured it, and the roofline's bound where the bandwidth is known."""
    judged = _judged(problem)
    profiles = [p for p in PROFILES.values() if problem.runs_on(p.name)]
    return [_profile_timings(problem, p, judged.get(p.name, {})) for p in profiles]
