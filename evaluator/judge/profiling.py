"""Profile runs, on the trusted side: which case, the judges' profiled pair, the artifacts.

A profile run (contract.Mode.PROFILE) checks correctness on the dev cases like a test
run, then, for one dev case per problem (`case_to_profile`), times one pair of rounds as
usual (the judge's clock: the times the summary shows) and runs one more pair with the
candidate's runner under torch.profiler (`candidate/profiler.py`). Each rank's runner
writes its Chrome trace into a file made here; the evaluating process reads it as
untrusted bytes (`judge/traces.py`) and makes the artifacts: per rank the trace, cut to
fit, and per problem a summary (`judge/profile_report.py`). Only dev cases are profiled:
a trace shows a case's inputs (shapes, sizes), and eval cases are hidden.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evaluator.contract import ARTIFACT_CAP_BYTES, ARTIFACTS_CAP_BYTES, Artifact
from evaluator.host import sandbox
from evaluator.judge import traces
from evaluator.judge.link import RunnerGone
from evaluator.judge.profile_report import Profiled, summary_artifacts
from problems.spec import Case, Problem

log = logging.getLogger(__name__)

# Calls per profiled round (and per timed round before it): enough to see a steady state,
# few enough that a GPU trace stays a few MiB.
PROFILE_CALLS = 10
# What a problem's summary artifacts take at most, together (TOP rows per rank).
SUMMARY_BYTES = 64 * 1024
SUMMARY_SUFFIXES = (".summary.md", ".summary.csv")


class ProfileCaseError(ValueError):
    """A profile run asked for a case that is not a dev case of a problem."""


def check_case_name(problems: Mapping[str, Problem], slugs: Iterable[str], name: str) -> None:
    """Refuse, before anything runs, a named case that some problem of `slugs` has no dev
    case of. The message is the same for an eval case and for no case at all, so that
    it confirms no hidden case's name."""
    for slug in slugs:
        problem = problems.get(slug)
        if name and problem is not None:
            case_to_profile(problem, name, world_size=0)


def case_to_profile(problem: Problem, name: str, *, world_size: int) -> Case:
    """The dev case named `name`, or with no name the one that moves the most bytes at
    `world_size` ranks (the first of those in a tie)."""
    dev = problem.cases("dev")
    if not name:
        if not dev:
            raise ProfileCaseError(f"{problem.slug} has no dev case to profile")
        return max(dev, key=lambda case: problem.bytes_moved(case, world_size))
    for case in dev:
        if case.name == name:
            return case
    names = ", ".join(case.name for case in dev) or "none"
    raise ProfileCaseError(
        f"profile case {name[:80]!r} is not a dev case of {problem.slug} (its dev cases: "
        f"{names}): only dev cases are profiled, since a trace shows a case's inputs"
    )


def trace_cap(problems: int, world_size: int) -> int:
    """Bytes each rank's trace may keep, so that every trace and summary of the
    evaluation fits the finished message's cap on artifacts together."""
    room = ARTIFACTS_CAP_BYTES - problems * SUMMARY_BYTES
    return max(0, min(ARTIFACT_CAP_BYTES, room // max(1, problems * world_size)))


def trace_files(folder: Path, slug: str, world_size: int, identity: Any) -> list[Path]:
    """One empty file per rank for its trace, the candidate user's, in a folder of the
    evaluating process's that bundle code cannot write (so it cannot swap a file for a
    link to one the trusted side would then read; reading never follows one either)."""
    folder.mkdir(mode=0o755, exist_ok=True)
    paths = [folder / f"{slug}.rank{rank}.trace.json" for rank in range(world_size)]
    for path in paths:
        path.unlink(missing_ok=True)
        sandbox.candidate_file(path, identity)
    return paths


def profiled_pair(judge: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """In a judge rank (`judge/rank.py`'s _Judge): a pair of rounds without warm-up (the
    case was just timed) with the candidate's runner profiling its round, its trace going
    to this rank's file. A profiler that fails to start or to write leaves the pair as
    it is and says why in "trace_error"; a runner that dies is the candidate's failure."""
    case = Case.from_json(payload["case"])
    link = judge.candidate
    trace = payload["traces"][judge.setup.rank]
    try:
        began = link.command("profile", {"trace": trace})
        answer = judge.pair(case, payload["seeds"], payload["checked"], [], tare=False)
        if answer.get("failure"):
            return answer
        ended = link.command("profile-end", None) if began.get("ok") else began
    except RunnerGone as gone:
        return {"ok": True, "failure": {"how": gone.how, "protocol": gone.protocol}}
    error = "" if ended.get("ok") else str(ended.get("error", "failed"))[:300]
    return {**answer, "trace_error": error}


def make_artifacts(profiled: Profiled, paths: list[Path], cap: int) -> list[Artifact]:
    """Per rank its trace (read, checked, cut to `cap`), then the problem's summary."""
    found = [_trace_artifact(profiled, rank, path, cap) for rank, path in enumerate(paths)]
    return [a for a in found if a is not None] + summary_artifacts(profiled)


def _trace_artifact(profiled: Profiled, rank: int, path: Path, cap: int) -> Artifact | None:
    where = f"rank {rank}, case {profiled.case.name}, {profiled.calls} calls profiled."
    if profiled.trace_errors.get(rank):
        profiled.notes[rank] = f"no trace: the profiler failed ({profiled.trace_errors[rank]})"
        return None
    try:
        raw = traces.read_trace(path)
        path.unlink()  # read once: what it holds is in memory now
        trace = traces.parse_trace(raw)
        profiled.summaries[rank] = traces.summarize(trace)
        data, dropped = traces.fit_trace(trace, cap, where)
    except traces.TraceError as exc:
        profiled.notes[rank] = f"trace dropped: {exc}"
        return None
    except Exception as exc:  # a bug here must not cost the evaluation its results
        log.exception("%s: rank %d's trace could not be summarised", profiled.slug, rank)
        profiled.notes[rank] = f"trace dropped: {type(exc).__name__}"
        return None
    if not data:
        profiled.notes[rank] = f"trace dropped: not even its frame fits {cap} bytes"
        return None
    note = f"{where} {dropped} events left out to fit {cap >> 10} KiB." if dropped else where
    profiled.notes[rank] = note
    name = f"{profiled.slug}.rank{rank}.trace.json"
    return Artifact.build(
        name=name, media_type="application/json", data=data, truncated=bool(dropped), note=note
    )


def within_budget(artifacts: list[Artifact]) -> list[Artifact]:
    """The artifacts, less the largest traces while together they exceed the finished
    message's cap (a portal refuses such a message whole). `trace_cap` makes this a
    backstop only."""
    kept = list(artifacts)
    while sum(len(a.data_b64) * 3 // 4 for a in kept) > ARTIFACTS_CAP_BYTES:
        largest = max(kept, key=lambda a: len(a.data_b64))
        log.warning("artifact %s left out: over the message's cap", largest.name)
        kept.remove(largest)
    return kept
