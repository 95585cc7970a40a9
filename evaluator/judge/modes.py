"""A problem judged in a submission's mode (contract.Mode): which ProblemRun does it.

Ranked and benchmark runs are the full judging, `ProblemRun` itself, unchanged: the
portal alone decides what ranks. A test run checks correctness on the dev cases and
times nothing; a profile run does the same, then profiles one dev case
(`judge/profiling.py`). Neither gives a time, a speedup or a roofline in its results, so
nothing can be ranked from them; a profile's times are in its summary, for the team.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluator.contract import ARTIFACT_CAP_BYTES, Artifact, CaseResult, Mode, ProblemStatus
from evaluator.judge import profiling
from evaluator.judge.problem_run import Failure, ProblemRun
from evaluator.judge.profile_report import Profiled
from problems.spec import Case


def problem_run(mode: Mode, **fields: Any) -> ProblemRun:
    """The run of one problem in `mode` (`fields` as ProblemRun takes them)."""
    if mode == Mode.TEST:
        return CorrectnessRun(**fields)
    if mode == Mode.PROFILE:
        return ProfileRun(**fields)
    return ProblemRun(**fields)


@dataclass
class CorrectnessRun(ProblemRun):
    """A test run: the dev cases' correctness trials (every call checked), on any host,
    and no timing rounds."""

    def _cases(self) -> tuple[Case, ...]:
        assert self.problem is not None
        return self.problem.cases("dev")

    def _time_side_by_side(self, case: Case, result: CaseResult) -> None:
        """Nothing is timed: the trials were the test."""

    def _summarize(self) -> None:
        super()._summarize()  # the worst errors; no case has a time to sum
        self.result.time_us = self.result.ref_time_us = None


@dataclass
class ProfileRun(CorrectnessRun):
    """A profile run: the dev cases' correctness, then one case profiled on every rank,
    last (after every other case passed)."""

    case_name: str = ""  # the request's profile_case ("": the dev case moving most bytes)
    trace_cap: int = ARTIFACT_CAP_BYTES  # bytes each rank's trace may keep
    artifacts: list[Artifact] = field(default_factory=list)
    profiled: Case | None = None

    def _cases(self) -> tuple[Case, ...]:
        assert self.problem is not None
        try:
            chosen = profiling.case_to_profile(
                self.problem, self.case_name, world_size=self.profile.world_size
            )
        except profiling.ProfileCaseError as exc:
            raise Failure(ProblemStatus.NOT_RUN, str(exc)) from None
        self.profiled = chosen
        return (*(case for case in super()._cases() if case != chosen), chosen)

    def _evaluate_case(self, case: Case) -> None:
        super()._evaluate_case(case)
        if case == self.profiled:
            self._profile(case, self.result.cases[-1])

    def _profile(self, case: Case, result: CaseResult) -> None:
        """One timed pair (the judges' clock, for the summary), then one pair with each
        rank's candidate runner under the profiler, writing its trace."""
        calls = profiling.PROFILE_CALLS
        seeds = [self._seed(case, "profile-timed", j) for j in range(calls)]
        warmup = self._warmup(case, -1)
        times = self._pair(case, result, seeds, [calls - 1], warmup=warmup, timed=True)
        assert times is not None  # reference first: never void
        paths = profiling.trace_files(
            self.pools.scratch / "profiles", self.slug, self.profile.world_size, self.pools.identity
        )
        order = {
            "case": case.to_json(),
            "seeds": [self._seed(case, "profiled", j) for j in range(calls)],
            "checked": [calls - 1],
            "traces": [str(path) for path in paths],
        }
        # A process that ran the profiler (and whatever bundle code did to it) is not
        # the next problem's.
        self.restart_candidates = True
        replies = sorted(self._command({"judge": ("profile", order)}), key=lambda r: r.rank)
        self._failed(replies)
        self._tampered(replies)
        self._judged(replies, case, result, timed=True)
        assert self.problem is not None
        profiled = Profiled(
            slug=self.slug,
            case=case,
            world_size=self.profile.world_size,
            backend=self.profile.backend,
            calls=calls,
            bytes_moved=result.bytes_moved,
            bandwidth_gbps=self.bandwidth_gbps,
            times=times,
            trace_errors={r.rank: str(r.data.get("trace_error") or "") for r in replies},
        )
        self.artifacts = profiling.make_artifacts(profiled, paths, self.trace_cap)
