from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q

from portal.problems.models import Problem
from portal.submissions.models import (
    ProblemResult,
    ProvisionalResult,
    Rerun,
    ResultRun,
    Submission,
)
from portal.submissions.services.reported import REPORTED_FIELDS


@dataclass(frozen=True)
class ResultLine:
    """One problem of a submission: its result, or None while it has none."""

    slug: str
    title: str
    result: ProblemResult | None
    runs: list[ResultRun] = field(default_factory=list)  # its judged runs, oldest first
    reruns: list[Rerun] = field(default_factory=list)  # re-runs waiting, running or failed
    # The result is its host's report while the evaluation runs (ProvisionalResult): shown,
    # not yet recorded, never on a board.
    provisional: bool = False


def _provisional_results(
    submission: Submission, problems: dict[str, Problem]
) -> dict[str, ProblemResult]:
    """The current attempt's results reported so far, as unsaved ProblemResults (the page
    shows them as it shows recorded ones); one query, none once the submission finished."""
    if not submission.is_active:
        return {}
    rows = ProvisionalResult.objects.filter(
        submission=submission, evaluation_id=submission.evaluation_id
    ).values_list("slug", "fields")
    results = {}
    for slug, fields in rows:
        problem = problems.get(slug)
        if problem is None:
            continue
        known = {k: v for k, v in fields.items() if k in REPORTED_FIELDS}
        version = submission.problem_versions.get(slug, problem.version)
        results[slug] = ProblemResult(
            submission=submission, problem=problem, problem_version=version, **known
        )
    return results


def submission_result_lines(submission: Submission) -> list[ResultLine]:
    """One line per problem of the bundle, in the bundle's order, with each result's judged
    runs; four queries, five while the evaluation runs (results reported so far)."""
    results = {r.problem.slug: r for r in submission.results.select_related("problem")}
    problems = Problem.objects.in_bulk(submission.problems, field_name="slug")
    provisional = _provisional_results(submission, problems)
    runs: dict[int, list[ResultRun]] = defaultdict(list)
    for run in ResultRun.objects.filter(result__submission=submission).order_by("judged_at", "id"):
        runs[run.result_id].append(run)
    reruns: dict[int, list[Rerun]] = defaultdict(list)
    pending = submission.reruns.exclude(status=Rerun.Status.DONE).order_by("created_at", "id")
    for rerun in pending:
        reruns[rerun.problem_id].append(rerun)
    lines = []
    for slug in submission.problems:
        result = results.get(slug)
        problem = problems.get(slug)
        lines.append(
            ResultLine(
                slug=slug,
                title=problem.title if problem else slug,
                result=result or provisional.get(slug),
                runs=runs[result.pk] if result else [],
                reruns=reruns[result.problem_id] if result else [],
                provisional=result is None and slug in provisional,
            )
        )
    return lines


def problem_public_solutions(problem: Problem) -> list[ProblemResult]:
    """Once a problem's solutions are public: each team's fastest passing result, fastest
    first, with its submission and team (one query)."""
    if not problem.solutions_are_public():
        return []
    results = (
        ProblemResult.objects.passed()
        .filter(
            problem=problem,
            submission__status=Submission.Status.DONE,
            submission__mode=Submission.Mode.RANKED,  # the others are the team's own
        )
        .select_related("submission__team")
        .order_by("-speedup", "submission__finished_at", "pk")
    )
    best: dict[int, ProblemResult] = {}
    for result in results:
        best.setdefault(result.submission.team_id, result)
    return list(best.values())


def team_recent_submissions(team, *, limit: int = 20) -> list[Submission]:
    # passed_count: a "done" with nothing passed is not shown as a success (one query).
    passed = Count("results", filter=Q(results__status=ProblemResult.Status.PASSED))
    # An entry's samples say so (their entry's name and link) where other runs say a mode.
    submissions = Submission.objects.for_team(team).select_related("user", "entry_sample__entry")
    return list(submissions.annotate(passed_count=passed)[:limit])


@dataclass(frozen=True)
class Fact:
    label: str
    value: str  # lines separated by newlines


# The fingerprint's keys in the order a reader compares two hosts; the rest follow as sent.
_FACT_LABELS = {
    "evaluator": "Evaluator",
    "driver": "Driver",
    "cuda": "CUDA",
    "torch": "PyTorch",
    "nccl": "NCCL",
    "topology": "Topology",
    "peer_bandwidth_gbps": "Measured peer bandwidth",
    "cpu": "CPU",
    "python": "Python",
    "hostname": "Host",
    "sandbox_start_s": "Sandbox start",
    "compile_s": "Compile pass",
    "pool_starts_s": "Rank processes' start",
    "sandbox": "Bundle code's sandbox",
    "network_isolated": "Bundle code's network",
    "candidate_frozen": "Candidate while the reference is timed",
    "candidate_user": "Bundle code's user",
    "memory_cap_mb": "Memory cap",
}
_SHOWN_ELSEWHERE = {"gpu", "gpu_count", "backend", "world_size"}
FACT_CAP_CHARS = 500
_SANDBOXES = {
    "bubblewrap": "bubblewrap (its own namespaces, read-only host files, a system-call filter)",
    "namespaces": "the network jail alone (a development setting; host files in view)",
    None: "none (a development host: bundle code ran as the worker's processes do)",
}


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        text = "\n".join(_text(item) for item in value)
    elif isinstance(value, dict):
        text = json.dumps(value, sort_keys=True)
    else:
        text = str(value)
    return text[:FACT_CAP_CHARS]


def _bandwidth(value: Any) -> str:
    def gbps(v: Any) -> str:
        return f"{v:.1f} GB/s" if isinstance(v, int | float) else _text(v)

    if not isinstance(value, dict):
        return gbps(value)
    parts = [f"{gbps(value['used'])}, used for the roofline"] if "used" in value else []
    parts += [f"{k.replace('_', ' ')}: {gbps(v)}" for k, v in value.items() if k != "used"]
    return "\n".join(parts)


def _fact_value(key: str, value: Any) -> str:
    if key == "peer_bandwidth_gbps":
        return _bandwidth(value)
    if key == "network_isolated" and isinstance(value, bool):
        return "none (a network namespace of its own)" if value else "the host's (not isolated)"
    if key == "sandbox":
        known = isinstance(value, str | None) and value in _SANDBOXES
        return _SANDBOXES[value] if known else _text(value)
    if key == "candidate_frozen" and isinstance(value, bool):
        if value:
            return "every process of its rank frozen (a cgroup of the rank's; no signal sent)"
        return (
            "not stopped: no freezer on this host (a development host; speedups not to be trusted)"
        )
    if key == "memory_cap_mb" and isinstance(value, int | float):
        return f"{value:g} MiB for the whole evaluation (a memory cgroup)"
    if key == "compile_s" and isinstance(value, int | float):
        return f"{value:.1f} s (every solution imported once, in parallel, before timing)"
    if key == "sandbox_start_s" and isinstance(value, int | float):
        return f"{value:.1f} s (scratch folder, cgroups and sandbox made, the bundle written)"
    if key == "pool_starts_s" and _seconds(value):
        starts = ", ".join(f"{v:.1f} s" for v in value)
        return f"{starts} (each start of the rank processes: the first, then any restart)"
    return _text(value)


def _seconds(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int | float) for v in value)


def _hardware(env: dict[str, Any]) -> list[Fact]:
    gpu, count = env.get("gpu"), env.get("gpu_count")
    facts = []
    if gpu or count:
        facts.append(Fact("GPUs", " × ".join(_text(v) for v in (gpu, count) if v)))
    if env.get("backend") or env.get("world_size"):
        ranks = f"{env['world_size']} ranks" if env.get("world_size") else ""
        facts.append(
            Fact(
                "Process group", ", ".join(v for v in (_text(env.get("backend") or ""), ranks) if v)
            )
        )
    return facts


def environment_facts(environment: Any) -> list[Fact]:
    """What the evaluating host reported about itself, as label/value pairs for a page.

    GPU hosts send the GPU model and count, driver, CUDA, NCCL, topology and measured peer
    bandwidth; CPU hosts only the software and the CPU. Unknown keys are shown as sent.
    """
    if not isinstance(environment, dict):
        return []
    # A sandbox of None is a fact (bundle code ran unconfined), not a value left empty.
    env = {k: v for k, v in environment.items() if k == "sandbox" or v not in (None, "", [], {})}
    facts = _hardware(env)
    for key, label in _FACT_LABELS.items():
        if key in env:
            facts.append(Fact(label, _fact_value(key, env[key])))
    for key, value in env.items():
        if key not in _FACT_LABELS and key not in _SHOWN_ELSEWHERE:
            # A key this page does not know yet still reads as words, not as a raw key.
            facts.append(Fact(str(key).replace("_", " ").capitalize(), _text(value)))
    return facts
