"""One problem of a bundle, judged: the parent's side of the judges' pairs of rounds.

The parent holds the seed secret and derives every seed; it sends each judge rank the
seeds of a PAIR (the reference's rounds, then the candidate's, on the same inputs) and
reads back JSON: times on the judges' own clocks, the verdict on the checked calls, and
the candidate's failure if any. Trials are pairs of one call, every call checked; timed
pairs alternate reference and candidate rounds (A B A B ...), each after a warm-up round
of its own, and a secret draw (here) picks the calls the judges check.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from evaluator.contract import CaseResult, ProblemResult, ProblemStatus, ResultFlag
from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import Settings
from evaluator.intake.compile import ImportFailure
from evaluator.judge.budget import CaseClock, room_for_another_pair
from evaluator.judge.pool import RankPools
from evaluator.judge.rank_pool import PoolTimeout, RankDied, Reply
from evaluator.judge.roofline import apply_roofline
from evaluator.judge.seeds import checked_calls, trial_seed
from evaluator.judge.stats import geomean, net_of_harness
from problems.spec import Case, Problem

log = logging.getLogger(__name__)

# Void pairs in a row before a case gives up: each needs the reference's outputs to
# outgrow rooms twice its largest output so far, which only growing outputs do.
MAX_VOID_PAIRS = 4


class Failure(Exception):
    """Ends a problem with a status other than PASSED."""

    def __init__(
        self,
        status: ProblemStatus,
        message: str,
        *,
        max_abs_err: float | None = None,
        max_rel_err: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.max_abs_err, self.max_rel_err = max_abs_err, max_rel_err


def cases_for(problem: Problem, kind: str, settings: Settings) -> tuple[Case, ...]:
    """The cases of `kind` ("dev" or "eval"); a host's private eval cases replace the demo."""
    if kind == "eval" and settings.eval_cases is not None:
        if problem.slug in settings.eval_cases:
            return settings.eval_cases[problem.slug]
        log.warning("PKB_EVAL_CASES_FILE has no cases for %s; using the demo set", problem.slug)
    return problem.cases(kind)


@dataclass
class ProblemRun:
    slug: str
    problem: Problem | None
    solutions: dict[str, str]  # the bundle's problem slug -> file name
    pools: RankPools
    profile: HardwareProfile
    settings: Settings
    evaluation_id: str
    on_round: Any = None  # called after each case with (slug, case name, a pair's numbers)
    between_pairs: Any = None  # called after each counted pair with (slug, case name)
    import_failure: ImportFailure | None = None  # from the compile pass
    bandwidth_gbps: float | None = None  # the host's peer bandwidth: the roofline's divisor
    deadline: float = 0.0
    cases_after: int = 0  # the problem's cases still to come after the one being timed
    case_began: float = 0.0  # when the case being timed began
    slowest_pair: float = 0.0  # of that case, in seconds (budget.py)
    # Bundle code may have patched its processes: not kept for the next problem.
    restart_candidates: bool = False
    result: ProblemResult = field(init=False)

    def __post_init__(self) -> None:
        self.result = ProblemResult(
            slug=self.slug, status=ProblemStatus.PASSED, world_size=self.profile.world_size
        )

    @property
    def filename(self) -> str:
        return self.solutions[self.slug]

    @property
    def module(self) -> str:
        return "pkb_solution_" + "".join(c if c.isalnum() else "_" for c in self.slug)

    def evaluate(self) -> ProblemResult:
        reason = self.why_not_run()
        if reason:
            self.result.status, self.result.message = ProblemStatus.NOT_RUN, reason
            return self.result
        if self.import_failure is not None:
            self.result.status = ProblemStatus.COMPILE_ERROR
            self.result.message = f"{self.filename} failed to import: {self.import_failure.error}"
            self.result.log = self.import_failure.log
            log.info("%s: %s %s", self.slug, self.result.status, self.result.message)
            return self.result
        assert self.problem is not None
        self.pools.ensure_started()
        marks = self.pools.log_marks()
        self.deadline = time.monotonic() + self.settings.problem_timeout_s
        try:
            self._load()
            cases = self._cases()
            for i, case in enumerate(cases):
                self.cases_after = len(cases) - 1 - i
                self._evaluate_case(case)
            self._summarize()
        except Failure as failure:
            self.result.status, self.result.message = failure.status, failure.message
            self.result.max_abs_err = _finite(failure.max_abs_err)
            self.result.max_rel_err = _finite(failure.max_rel_err)
        finally:
            # Bundle code that failed, cheated or tampered may have left its processes in
            # any state (patched, a reply of its own in the judge's pipe): not for the next
            # problem.
            if self.restart_candidates or self.result.status != ProblemStatus.PASSED:
                self.pools.candidate_failed()
            self.result.log = self.pools.logs_since(marks)
            for done in self.result.cases:
                done.max_abs_err = _finite(done.max_abs_err)
                done.max_rel_err = _finite(done.max_rel_err)
        log.info("%s: %s %s", self.slug, self.result.status, self.result.message)
        return self.result

    def why_not_run(self) -> str:
        if self.problem is None:
            return f"unknown problem {self.slug!r} on this host"
        if self.slug not in self.solutions:
            return f"no {self.slug}.py in the bundle"
        if self.profile.world_size not in self.problem.world_sizes:
            sizes = ", ".join(map(str, self.problem.world_sizes))
            return f"{self.slug} runs on {sizes} ranks, not {self.profile.world_size}"
        return ""

    def _cases(self) -> tuple[Case, ...]:
        assert self.problem is not None
        return cases_for(self.problem, self.profile.case_kind, self.settings)

    def _command(self, orders: dict[str, tuple[str, Any]]) -> list[Reply]:
        """Run one command; every way it can go wrong becomes a Failure."""
        try:
            replies = self.pools.command(orders, timeout_s=self.deadline - time.monotonic())
        except PoolTimeout:
            self.pools.candidate_failed()
            raise Failure(
                ProblemStatus.TIMEOUT,
                f"no answer within {self.settings.problem_timeout_s:g} s; rank processes killed",
            ) from None
        except RankDied as exc:
            if exc.kind == "candidate":
                self.pools.candidate_failed()
                raise Failure(ProblemStatus.RUNTIME_ERROR, f"rank {exc.rank} {exc.how}") from None
            self.pools.kill()
            raise Failure(
                ProblemStatus.RUNTIME_ERROR, f"the {exc.kind}'s rank {exc.rank} {exc.how}"
            ) from None
        for reply in replies:
            if not reply.data.get("ok", False):
                raise self._error(reply)
        return replies

    def _error(self, reply: Reply) -> Failure:
        error = str(reply.data.get("error", "unknown error"))[:500]
        if reply.kind == "candidate":  # only at load: its import
            self.pools.candidate_failed()
            return Failure(
                ProblemStatus.COMPILE_ERROR, f"{self.filename} failed to import: {error}"
            )
        log.error("%s rank %d failed on %s: %s", reply.kind, reply.rank, self.slug, reply.data)
        self.pools.kill()
        return Failure(
            ProblemStatus.RUNTIME_ERROR,
            f"the evaluator failed on rank {reply.rank} ({error}); not your bundle's fault",
        )

    def _load(self) -> None:
        path = self.pools.scratch / "bundle" / self.filename
        problem = {"problem": self.problem}
        code = {"path": str(path), "module": self.module}
        orders = {"judge": ("load", problem), "reference": ("load", problem)}
        self._command({**orders, "candidate": ("load", code)})

    def _seed(self, case: Case, *parts: object) -> int:
        return trial_seed(
            self.settings.seed_secret, self.evaluation_id, self.slug, case.name, *parts
        )

    def _evaluate_case(self, case: Case) -> None:
        assert self.problem is not None
        result = CaseResult(
            case=case.name,
            dtype=case.dtype,
            passed=False,
            bytes_moved=self.problem.bytes_moved(case, self.profile.world_size),
        )
        self.result.cases.append(result)
        self.case_began, self.slowest_pair = time.monotonic(), 0.0
        for trial in range(self.settings.trials):
            self._pair(
                case, result, [self._seed(case, "trial", trial)], [0], warmup=[], timed=False
            )
        self._time_side_by_side(case, result)
        result.passed = True

    @property
    def calls_per_round(self) -> int:
        return max(1, math.ceil(self.settings.iters / self.settings.rounds))

    def _time_side_by_side(self, case: Case, result: CaseResult) -> None:
        """Pairs of rounds on the same inputs, the side that goes first alternating
        (A B, B A, A B ...): both are timed in the same minutes, each pair gives one
        speedup, and an advantage of going first or second falls on both sides alike.

        A settling pair comes first and is not counted: it sizes the rounds (the judges'
        `calls_for`) and takes the case's first-round costs (allocations of new shapes,
        first launches) off the counted pairs. Then at least `rounds` pairs, and more
        while the interval's half-width is over `target_halfwidth` of the median, until
        `max_rounds` or the problem's time runs short; the case says how many pairs it
        took and whether its interval settled."""
        system = random.SystemRandom()
        settle = [self._seed(case, "settle", j) for j in range(self.calls_per_round)]
        checked = [system.randrange(len(settle))]
        warmup = self._warmup(case, -1)
        fitted = self._pair(case, result, settle, checked, warmup=warmup, timed=True, fit=True)
        assert fitted is not None  # reference first: never void
        calls = fitted[3]
        plan = checked_calls(self.settings.rounds, calls, self.settings.timed_checks)
        began = time.monotonic()
        for k in range(self.settings.most_rounds):
            if k >= self.settings.rounds and not self._more(result, began):
                break
            if k >= self.settings.rounds:
                plan[k] = [calls - 1, system.randrange(calls)]
            first = "reference" if k % 2 == 0 else "candidate"
            *times, done = self._timed_pair(case, result, k, calls, plan.get(k, []), first)
            names = ("reference_gross_us", "candidate_gross_us", "tare_us")
            pair: dict[str, Any] = {n: t / done * 1e6 for n, t in zip(names, times, strict=True)}
            result.rounds.append({**pair, "first": first})
            result.iterations += done
            net_of_harness(result, self.settings.target_halfwidth, self.settings.run_spread)
            if self.between_pairs is not None:
                self.between_pairs(self.slug, case.name)
        if self.on_round is not None:
            for pair in result.rounds:
                self.on_round(self.slug, case.name, dict(pair))

    def _timed_pair(
        self, case: Case, result: CaseResult, k: int, calls: int, checked: list[int], first: str
    ) -> tuple[float, float, float, int]:
        """Timed pair `k`; drawn again on fresh seeds while it comes back void (the
        reference's outputs outgrew the rooms the candidate answered in: judge/rank.py,
        `candidate_first`), never run again on inputs the candidate has seen."""
        for attempt in range(MAX_VOID_PAIRS):
            again = ("void", attempt) if attempt else ()
            seeds = [self._seed(case, "timing", k, j, *again) for j in range(calls)]
            times = self._pair(
                case, result, seeds, sorted(set(checked)),
                warmup=self._warmup(case, k, *again), timed=True, first=first,
            )  # fmt: skip
            if times is not None:
                return times
        raise RuntimeError(f"{MAX_VOID_PAIRS} pairs in a row outgrew their rooms")

    def _warmup(self, case: Case, k: int, *again: object) -> list[int]:
        return [self._seed(case, "warmup", k, j, *again) for j in range(self.settings.warmup)]

    def _more(self, result: CaseResult, began: float) -> bool:
        """Another pair: the interval is still wider than asked, and the problem's time
        allows it, with what it must leave (budget.py)."""
        if result.settled is not False:
            return False
        now = time.monotonic()
        clock = CaseClock(
            left_s=self.deadline - now, timed_s=now - began, pairs=len(result.rounds),
            slowest_s=self.slowest_pair, case_s=now - self.case_began,
            cases_after=self.cases_after, timeout_s=self.settings.problem_timeout_s,
        )  # fmt: skip
        return room_for_another_pair(clock)

    def _pair(
        self,
        case: Case,
        result: CaseResult,
        seeds: list[int],
        checked: list[int],
        *,
        warmup: list[int],
        timed: bool,
        first: str = "reference",
        fit: bool = False,
    ) -> tuple[float, float, float, int] | None:
        """One pair on every judge; the slowest rank's times (s) of the two timed rounds,
        and of the reference's runner's harness alone (the tare), and the calls they made
        (with `fit`, the judges may make fewer than asked: judge/rank.py, `calls_for`).
        None for a void pair (`_timed_pair`)."""
        order: dict[str, Any] = {"case": case.to_json(), "seeds": seeds, "checked": checked}
        # The settling pair's times are not kept: no tare for it either.
        order.update(warmup=warmup, tare=timed and not fit, first=first, fit=fit)
        began = time.monotonic()
        replies = sorted(self._command({"judge": ("pair", order)}), key=lambda r: r.rank)
        self.slowest_pair = max(self.slowest_pair, time.monotonic() - began)
        # The reference's rounds are not the candidate's time: give them back.
        reference = max(_num(r.data.get("reference_s")) for r in replies)
        if math.isfinite(reference):
            self.deadline += min(time.monotonic() - began, 2 * reference)
        self._failed(replies)
        self._tampered(replies)
        if any(r.data.get("void") for r in replies):
            return None
        self._judged(replies, case, result, timed=timed)
        candidate = max(_num(r.data.get("candidate_s")) for r in replies)
        calls = min(int(r.data.get("calls") or len(seeds)) for r in replies)
        return reference, candidate, max(_num(r.data.get("harness_s")) for r in replies), calls

    def _failed(self, replies: list[Reply]) -> None:
        failed = sorted((r for r in replies if r.data.get("failure")), key=lambda r: r.rank)
        if not failed:
            return
        self.pools.candidate_failed()
        reply = failed[0]
        failure = reply.data["failure"]
        also = _also(failed[1:])
        if failure.get("protocol"):
            self._flag(ResultFlag.TAMPERED, f"rank {reply.rank}'s runner {failure['how']}")
            raise Failure(
                ProblemStatus.RUNTIME_ERROR,
                f"rank {reply.rank}'s runner {failure['how']}: only bundle code writing on "
                "the harness's pipe does that",
            )
        if "how" in failure:
            raise Failure(ProblemStatus.RUNTIME_ERROR, f"rank {reply.rank} {failure['how']}{also}")
        raise Failure(
            ProblemStatus.RUNTIME_ERROR, f"rank {reply.rank} raised {failure['error']}{also}"
        )

    def _tampered(self, replies: list[Reply]) -> None:
        tampered = sorted({str(n) for r in replies for n in r.data.get("tampered") or []})
        if tampered:
            self._flag(ResultFlag.TAMPERED, f"bundle code replaced {', '.join(tampered)}")
            # Whatever it patched stays patched in these processes: not for the next problem.
            self.restart_candidates = True

    def _judged(self, replies: list[Reply], case: Case, result: CaseResult, *, timed: bool) -> None:
        for reply in replies:
            verdict = reply.data.get("verdict") or {}
            result.max_abs_err = _max(result.max_abs_err, verdict.get("max_abs_err"))
            result.max_rel_err = _max(result.max_rel_err, verdict.get("max_rel_err"))
        failed = [r for r in replies if not (r.data.get("verdict") or {"ok": True})["ok"]]
        if not failed:
            return
        verdict = failed[0].data["verdict"]
        where = f"rank {failed[0].rank}, case {case.name} ({case.dtype})"
        if timed:
            where += ", a timed call (every call gets fresh inputs; timed outputs are checked)"
        # The errors of the element the message names, on the problem and on its case's
        # row alike: not another rank's, so the columns say what the message says.
        result.max_abs_err = _num(verdict.get("max_abs_err"))
        result.max_rel_err = _num(verdict.get("max_rel_err"))
        raise Failure(
            ProblemStatus.WRONG_ANSWER,
            f"{where}: {verdict.get('message', '')}",
            max_abs_err=result.max_abs_err,
            max_rel_err=result.max_rel_err,
        )

    def _flag(self, flag: ResultFlag, why: str) -> None:
        if str(flag) not in self.result.flags:
            self.result.flags.append(str(flag))
            log.warning("%s flagged %s: %s", self.slug, flag, why)
            note = f"flagged {flag}: {why}"
            self.result.message = f"{self.result.message}; {note}" if self.result.message else note

    def _summarize(self) -> None:
        cases = self.result.cases
        self.result.time_us = sum(c.time_us or 0.0 for c in cases)
        self.result.ref_time_us = sum(c.ref_time_us or 0.0 for c in cases)
        # The geometric mean of the cases' medians, and of their intervals' ends: when every
        # case's interval holds its true median (probability at least 1 - m * 5% for m
        # cases, by Bonferroni), the geometric mean of the true medians lies in between.
        for name in ("speedup", "speedup_low", "speedup_high"):
            values = [getattr(c, name) for c in cases]
            if cases and all(v for v in values):
                setattr(self.result, name, geomean(values))
        self.result.max_abs_err = _finite(max((_num(c.max_abs_err) for c in cases), default=None))
        self.result.max_rel_err = _finite(max((_num(c.max_rel_err) for c in cases), default=None))
        apply_roofline(self.result, self.bandwidth_gbps)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else math.inf


def _max(current: float | None, new: Any) -> float | None:
    if not isinstance(new, (int, float)):
        return current
    return float(new) if current is None else max(current, float(new))


def _finite(value: float | None) -> float | None:
    # JSON has no Infinity or NaN; "unbounded" is shown by the message instead.
    return value if value is not None and math.isfinite(value) else None


def _also(others: list[Reply]) -> str:
    """The other ranks that failed, named after the first's message."""
    if not others:
        return ""
    ranks = [str(r.rank) for r in others]
    named = ranks[0] if len(ranks) == 1 else ", ".join(ranks[:-1]) + " and " + ranks[-1]
    return f" (rank{'s' if len(ranks) > 1 else ''} {named} failed too)"
