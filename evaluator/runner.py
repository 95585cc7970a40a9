"""Evaluates a bundle: the trusted orchestration around the two pools of rank processes.

One judge pool and one candidate pool of W ranks each live for the whole bundle and are
reused across problems and trials; they are restarted only after a failure that may have
left them wedged (a timeout, a crash, an error inside a collective). The seed secret stays
in this process: ranks get derived trial seeds only.
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import torch

from evaluator import sandbox
from evaluator.bundle import Bundle
from evaluator.compile import ImportFailure, import_solutions
from evaluator.contract import CaseResult, ProblemResult, ProblemStatus, ResultFlag
from evaluator.environment import environment_fingerprint
from evaluator.pool import (
    Conversation,
    EvaluatorError,
    PoolTimeout,
    ProtocolViolation,
    RankDied,
    RankPools,
    Reply,
)
from evaluator.probe import apply_roofline
from evaluator.profiles import HardwareProfile
from evaluator.ranks import NO_MULTICAST
from evaluator.runtime import EXTENSION_CACHE_ENV
from evaluator.seeds import trial_seed
from evaluator.settings import Settings
from evaluator.timing import median_interval, round_time
from problems.registry import all_problems
from problems.spec import Case, Problem

log = logging.getLogger(__name__)

# The host's peer bandwidth (GB/s) by (profile, world size), measured once per process.
PEER_BANDWIDTH: dict[tuple[str, int], dict[str, float]] = {}
# The rendezvous of symmetric memory alone takes ~3 s the first time.
PROBE_TIMEOUT_S = 120.0

Progress = Callable[[int, int, str], None]
# Called after each pair of rounds with (problem slug, case name, the pair's numbers):
# what `evaluator.floor --calibrate` reads to calibrate the trusted clock's margin.
RoundObserver = Callable[[str, str, dict[str, Any]], None]


def evaluate_bundle(
    bundle: Bundle,
    *,
    slugs: list[str],
    profile: HardwareProfile,
    settings: Settings,
    evaluation_id: str,
    on_progress: Progress | None = None,
    problems: Mapping[str, Problem] | None = None,
    on_round: RoundObserver | None = None,
) -> tuple[list[ProblemResult], dict[str, Any]]:
    """Judge the bundle's solutions of `slugs`, in that order, on `profile`'s ranks.

    `problems` replaces the repository's catalog (tests, unpublished problems). A crash or
    hang of bundle code is a result; only a broken host raises EvaluatorError.
    """
    catalog = dict(problems) if problems is not None else {p.slug: p for p in all_problems()}
    _check_host(profile)
    environment = environment_fingerprint(profile)
    identity = settings.candidate_user
    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="pkb-eval-", dir=settings.scratch_dir))
    if identity is not None:
        # Root's own; the candidate user may pass through (not list) to its folders.
        scratch.chmod(0o711)
    try:
        sandbox.check_reachable(scratch, identity)
    except sandbox.SandboxError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise EvaluatorError(str(exc)) from exc
    env = candidate_environment(scratch)
    # Bundle code must not read this process's environment through /proc, and whatever it
    # detaches (double fork, setsid) must come back here to be killed.
    sandbox.not_dumpable()
    sandbox.become_subreaper()
    shm_before, began_at = sandbox.shm_entries(), time.time()
    try:
        jail, executable = start_sandbox(scratch / "sandbox", settings)
    except sandbox.SandboxError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise EvaluatorError(f"bundle code cannot be confined: {exc}") from exc
    environment["network_isolated"] = jail is not None
    environment["candidate_user"] = identity.name if identity else None
    # multiprocessing's resource tracker is a child that outlives us all: started through
    # the launcher it holds no copy of the worker's environment for bundle code to read;
    # as the worker's user (not the candidate user), so bundle code cannot kill it.
    tracker_launcher = str(sandbox.launcher(scratch / "sandbox", None)) if executable else None
    with sandbox.spawning_with(tracker_launcher):
        resource_tracker.ensure_running()
    pools = RankPools(
        world_size=profile.world_size,
        backend=profile.backend,
        scratch=scratch,
        candidate_env=env,
        limits=settings.limits,
        executable=executable,
        protected=[jail.holder.pid] if jail else [],
        identity=identity,
    )
    try:
        bundle.write_to(scratch / "bundle")
        sandbox.hand_over([scratch / name for name in CANDIDATE_FOLDERS], identity)
        runs = [
            _ProblemRun(
                slug=slug,
                problem=catalog.get(slug),
                bundle=bundle,
                pools=pools,
                profile=profile,
                settings=settings,
                evaluation_id=evaluation_id,
                on_round=on_round,
            )
            for slug in slugs
        ]
        runnable = [run for run in runs if not run.why_not_run()]
        began = time.monotonic()
        failures = import_solutions(
            {run.filename: run.module for run in runnable},
            folder=scratch / "bundle",
            env=env,
            logs=pools.logs,
            timeout_s=settings.problem_timeout_s,
            limits=settings.limits,
            executable=executable,
            identity=identity,
        )
        pools.sweep_orphans()
        environment["compile_s"] = round(time.monotonic() - began, 3)
        for run in runnable:
            run.import_failure = failures.get(run.filename)
        if any(run.import_failure is None for run in runnable):
            bandwidth = peer_bandwidth(pools, profile, settings)
            if bandwidth is not None:
                environment["peer_bandwidth_gbps"] = bandwidth
                for run in runs:
                    run.bandwidth_gbps = bandwidth["used"]
        results = []
        for done, run in enumerate(runs):
            if on_progress:
                on_progress(done, len(runs), run.slug)
            results.append(run.evaluate())
        if on_progress:
            on_progress(len(runs), len(runs), "")
        return results, environment
    finally:
        pools.stop()
        if jail is not None:
            jail.close()
        sandbox.remove_new_shm(shm_before, since=began_at, identity=identity)
        if settings.keep_scratch:
            log.info("kept scratch directory %s", scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


# The folders of the scratch directory that bundle code may write (handed over to the
# candidate user); everything else there (logs, the launcher, judges' files) is root's.
CANDIDATE_FOLDERS = ("bundle", "home", "tmp", "extensions", "triton")


def candidate_environment(scratch: Path) -> dict[str, str]:
    """Variables of every process that runs bundle code, compile pass included.

    Build caches live in the evaluation's scratch directory: one team's bundle must never
    find a build planted by another's (a shared cache would let it).
    """
    for name in CANDIDATE_FOLDERS[1:]:
        (scratch / name).mkdir(exist_ok=True, mode=0o700)
    return {
        EXTENSION_CACHE_ENV: str(scratch / "extensions"),
        "TRITON_CACHE_DIR": str(scratch / "triton"),
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        **NO_MULTICAST,
    }


def check_sandbox(settings: Settings) -> bool:
    """At worker start-up: say loudly whether bundle code will have network access, and
    raise SandboxError where it could not run as the candidate user."""
    sandbox.not_dumpable()
    check_identity(settings)
    if not settings.isolate_network:
        log.warning("PKB_ISOLATE_NETWORK=false: CANDIDATES HAVE NETWORK ACCESS")
        return False
    with tempfile.TemporaryDirectory(prefix="pkb-sandbox-check-") as folder:
        jail, _ = start_sandbox(Path(folder), settings)
        if jail is None:
            return False
        jail.close()
    log.info("bundle code runs in a network namespace of its own (loopback only)")
    return True


def check_identity(settings: Settings) -> None:
    """Bundle code, as the candidate user, can reach the scratch folder and import the
    harness (interpreter, packages and repository readable); else SandboxError."""
    identity = settings.candidate_user
    if identity is None:
        log.info(
            "bundle code runs as the worker's user (uid %d): the worker is not root", os.geteuid()
        )
        return
    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    sandbox.check_reachable(settings.scratch_dir, identity)
    with tempfile.TemporaryDirectory(prefix="pkb-identity-check-") as folder:
        executable = sandbox.plain_launcher(Path(folder), identity)
        assert executable is not None  # plain_launcher raises instead, with an identity
        code = f"import sys; sys.path[:0] = {sys.path!r}; import evaluator.ranks"
        done = subprocess.run(
            [executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    if done.returncode != 0:
        raise sandbox.SandboxError(
            f"bundle code cannot import the harness as {identity.name}: {done.stderr[-800:]}"
        )
    log.info("bundle code runs as %s (uid %d, gid %d)", identity.name, identity.uid, identity.gid)


def start_sandbox(
    folder: Path, settings: Settings
) -> tuple[sandbox.NetworkJail | None, str | None]:
    """The network jail (None where the host refuses it) and the launcher of bundle code.

    Raises SandboxError where bundle code cannot be switched to the candidate user."""
    identity = settings.candidate_user
    jail = sandbox.NetworkJail.start(folder, identity) if settings.isolate_network else None
    if jail is not None:
        return jail, jail.executable
    if settings.isolate_network:
        log.warning(
            "CANDIDATES HAVE NETWORK ACCESS: this host allows no user and network namespace "
            "(set PKB_ISOLATE_NETWORK=false to acknowledge)"
        )
    return None, sandbox.plain_launcher(folder, identity)


def peer_bandwidth(
    pools: RankPools, profile: HardwareProfile, settings: Settings
) -> dict[str, float] | None:
    """The peer bandwidth of this host, measured once per process by the judge ranks.

    None on gloo, or when the measurement failed (then no result gets a roofline).
    """
    if profile.backend != "nccl" or profile.world_size < 2:
        return None  # one rank has no peers: nothing to measure (a host of one GPU)
    key = (profile.name, profile.world_size)
    if key not in PEER_BANDWIDTH:
        pools.ensure_started()
        try:
            replies = pools.command(
                judge=("probe", {}), timeout_s=max(PROBE_TIMEOUT_S, settings.problem_timeout_s)
            )
        except (RankDied, PoolTimeout) as exc:
            log.error("peer bandwidth probe failed: %s", exc)
            pools.kill()
            return None
        if not all(r.data.get("ok") for r in replies):
            log.error("peer bandwidth probe failed: %s", [r.data.get("error") for r in replies])
            pools.kill()
            return None
        measured = replies[0].data["bandwidth"]
        PEER_BANDWIDTH[key] = {k: float(measured[k]) for k in ("one_peer", "all_peers", "used")}
        log.info("peer bandwidth of %s: %s GB/s", profile.name, PEER_BANDWIDTH[key])
    return dict(PEER_BANDWIDTH[key])


def cases_for(problem: Problem, kind: str, settings: Settings) -> tuple[Case, ...]:
    """The cases of `kind` ("dev" or "eval"); a host's private eval cases replace the demo."""
    if kind == "eval" and settings.eval_cases is not None:
        if problem.slug in settings.eval_cases:
            return settings.eval_cases[problem.slug]
        log.warning("PKB_EVAL_CASES_FILE has no cases for %s; using the demo set", problem.slug)
    return problem.cases(kind)


def _check_host(profile: HardwareProfile) -> None:
    if profile.backend != "nccl":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < profile.world_size:
        raise EvaluatorError(
            f"profile {profile.name} needs {profile.world_size} CUDA GPUs; this host has {count}"
        )


# --- the pools -------------------------------------------------------------------------


class _Failure(Exception):
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


# --- one problem -----------------------------------------------------------------------


@dataclass
class _ProblemRun:
    slug: str
    problem: Problem | None
    bundle: Bundle
    pools: RankPools
    profile: HardwareProfile
    settings: Settings
    evaluation_id: str
    on_round: RoundObserver | None = None
    import_failure: ImportFailure | None = None  # from the compile pass
    bandwidth_gbps: float | None = None  # the host's peer bandwidth: the roofline's divisor
    deadline: float = 0.0
    # Bundle code may have patched its processes: not kept for the next problem.
    restart_candidates: bool = False
    result: ProblemResult = field(init=False)

    def __post_init__(self) -> None:
        self.result = ProblemResult(
            slug=self.slug, status=ProblemStatus.PASSED, world_size=self.profile.world_size
        )

    @property
    def filename(self) -> str:
        return self.bundle.solutions[self.slug]

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
            for case in cases_for(self.problem, self.profile.case_kind, self.settings):
                self._evaluate_case(case)
            self._summarize()
        except _Failure as failure:
            self.result.status, self.result.message = failure.status, failure.message
            self.result.max_abs_err = _finite(failure.max_abs_err)
            self.result.max_rel_err = _finite(failure.max_rel_err)
        finally:
            if self.restart_candidates:
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
        if self.slug not in self.bundle.solutions:
            return f"no {self.slug}.py in the bundle"
        if self.profile.world_size not in self.problem.world_sizes:
            sizes = ", ".join(map(str, self.problem.world_sizes))
            return f"{self.slug} runs on {sizes} ranks, not {self.profile.world_size}"
        return ""

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _command(
        self, conversation: Conversation | None = None, **orders: tuple[str, Any]
    ) -> list[Reply]:
        """Run one command; every way it can go wrong becomes a _Failure."""
        try:
            replies = self.pools.command(
                **orders, timeout_s=self._remaining(), conversation=conversation
            )
        except ProtocolViolation as exc:
            if exc.kind == "candidate":
                self.pools.candidate_failed()
            else:
                self.pools.kill()
            self._flag(ResultFlag.TAMPERED, f"{exc}")
            raise _Failure(
                ProblemStatus.RUNTIME_ERROR,
                f"{exc}: only bundle code writing on the harness's channel does that",
            ) from None
        except PoolTimeout as exc:
            if any(kind == "candidate" for kind, _ in exc.pending):
                self.pools.candidate_failed()
            else:
                self.pools.kill()
            wrong = self._wrong_answers(exc.replies)
            if wrong:
                raise wrong from None
            raise _Failure(
                ProblemStatus.TIMEOUT,
                f"no answer within {self.settings.problem_timeout_s:g} s; rank processes killed",
            ) from None
        except RankDied as exc:
            if exc.kind == "candidate":
                self.pools.candidate_failed()
                raise _Failure(ProblemStatus.RUNTIME_ERROR, f"rank {exc.rank} {exc.how}") from None
            self.pools.kill()
            raise _Failure(
                ProblemStatus.RUNTIME_ERROR, f"the judge's rank {exc.rank} {exc.how}"
            ) from None
        for reply in replies:
            if not reply.data.get("ok", False):
                if reply.kind == "candidate":
                    self.pools.candidate_failed()
                else:
                    self.pools.kill()
                raise self._error(reply)
        return replies

    def _error(self, reply: Reply) -> _Failure:
        error = str(reply.data.get("error", "unknown error"))[:500]
        if reply.kind == "judge":
            log.error("judge rank %d failed on %s: %s", reply.rank, self.slug, reply.data)
            return _Failure(
                ProblemStatus.RUNTIME_ERROR,
                f"the judge failed on rank {reply.rank} ({error}); is the output malformed?",
            )
        if reply.data.get("phase") == "import":
            return _Failure(
                ProblemStatus.COMPILE_ERROR, f"{self.filename} failed to import: {error}"
            )
        return _Failure(ProblemStatus.RUNTIME_ERROR, f"rank {reply.rank} raised {error}")

    def _load(self) -> None:
        path = self.pools.scratch / "bundle" / self.filename
        order = {"problem": self.problem, "path": str(path), "module": self.module}
        self._command(judge=("load", {"problem": self.problem}), candidate=("load", order))

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
        for trial in range(self.settings.trials):
            seed = self._seed(case, "trial", trial)
            order = {"case": case.to_json(), "seed": seed}
            replies = self._command(judge=("check", order), candidate=("run", order))
            self._judged(replies, case, result, timed=False)
        self._time_side_by_side(case, result)
        result.passed = True

    def _judged(self, replies: list[Reply], case: Case, result: CaseResult, *, timed: bool) -> None:
        verdicts = [r for r in replies if r.kind == "judge"]
        for reply in verdicts:
            verdict = reply.data.get("verdict") or {}
            result.max_abs_err = _max(result.max_abs_err, verdict.get("max_abs_err"))
            result.max_rel_err = _max(result.max_rel_err, verdict.get("max_rel_err"))
        wrong = self._wrong_answers(replies, case=case, timed=timed)
        if wrong:
            raise wrong

    def _wrong_answers(
        self, replies: list[Reply], *, case: Case | None = None, timed: bool = False
    ) -> _Failure | None:
        failed = sorted(
            (
                r
                for r in replies
                if r.kind == "judge" and not (r.data.get("verdict") or {"ok": True})["ok"]
            ),
            key=lambda r: r.rank,
        )
        if not failed:
            return None
        verdict = failed[0].data["verdict"]
        where = f"rank {failed[0].rank}"
        if case is not None:
            where += f", case {case.name} ({case.dtype})"
        if timed:
            where += (
                ", a timed call (every call gets fresh inputs; several timed outputs are checked)"
            )
        worst = [r.data["verdict"] for r in failed]
        return _Failure(
            ProblemStatus.WRONG_ANSWER,
            f"{where}: {verdict.get('message', '')}",
            max_abs_err=max(_num(v.get("max_abs_err")) for v in worst),
            max_rel_err=max(_num(v.get("max_rel_err")) for v in worst),
        )

    @property
    def calls_per_round(self) -> int:
        return max(1, math.ceil(self.settings.iters / self.settings.rounds))

    def _checked_calls(self) -> dict[int, list[int]]:
        """Timed calls whose outputs the judge checks, by round: the last call of the last
        round and others drawn at random over all rounds, here, where bundle code cannot
        see the draw. A candidate rank learns a round's checked calls only after it has
        committed to the outputs of all of them (`_Commit`)."""
        rounds, calls = self.settings.rounds, self.calls_per_round
        others = [(k, i) for k in range(rounds) for i in range(calls)][:-1]
        count = min(len(others), self.settings.timed_checks - 1)
        drawn = {(rounds - 1, calls - 1), *random.SystemRandom().sample(others, max(0, count))}
        plan: dict[int, list[int]] = {}
        for k, i in sorted(drawn):
            plan.setdefault(k, []).append(i)
        return plan

    def _time_side_by_side(self, case: Case, result: CaseResult) -> None:
        """Reference and candidate rounds alternate on the same inputs (A B A B ...): both
        are timed in the same minutes, and each pair gives one speedup."""
        plan = self._checked_calls()
        reference: list[_Round] = []
        for k in range(self.settings.rounds):
            # One seed per call, warm-up included: every call gets inputs of its own; the
            # pair's two rounds get the same ones.
            seeds = [
                self._seed(case, "timing", k, j)
                for j in range(self.settings.warmup + self.calls_per_round)
            ]
            reference.append(self._reference_round(case, seeds))
            candidate = self._round(case, seeds, kind="candidate", checked=plan.get(k, []))
            self._judged(candidate.replies, case, result, timed=True)
            self._check_commitments(candidate)
            self._check_tampering(candidate)
            pair = {"reference_us": reference[-1].time_us, "candidate_us": candidate.time_us}
            result.rounds.append(pair)
            mismatch = self._check_clock(candidate, reference)
            if self.on_round is not None:
                self.on_round(self.slug, case.name, _observed(pair, reference[-1], candidate))
            if mismatch:
                break  # the times of this process are not to be believed any longer
        self._speedup(result)

    def _reference_round(self, case: Case, seeds: list[int]) -> _Round:
        # The reference's time is not the candidate's: give the deadline back afterwards.
        began = time.monotonic()
        self.deadline = max(self.deadline, began + self.settings.problem_timeout_s)
        timed = self._round(case, seeds, kind="judge", checked=[])
        self.deadline += time.monotonic() - began
        return timed

    def _round(self, case: Case, seeds: list[int], *, kind: str, checked: list[int]) -> _Round:
        """One round of `kind`'s pool ("judge" times the reference), its checked calls'
        outputs compared by the judge in the same command."""
        warmup = self.settings.warmup
        order: dict[str, Any] = {"case": case.to_json(), "seeds": seeds, "warmup": warmup}
        orders: dict[str, tuple[str, Any]] = {kind: ("time", order)}
        if checked:
            check = {"case": case.to_json(), "seeds": [seeds[warmup + i] for i in checked]}
            orders["judge"] = ("check", check)
        commit = _Commit(checked, calls=len(seeds), warmup=warmup, kind=kind)
        commit.sent_at = time.monotonic()
        replies = self._command(commit, **orders)
        timed = sorted((r for r in replies if r.kind == kind), key=lambda r: r.rank)
        per_rank = [r.data["times_us"] for r in timed]
        overheads = [
            commit.committed_at[r.rank] - commit.sent_at - sum(r.data["times_us"]) / 1e6
            for r in timed
        ]
        return _Round(
            time_us=round_time([times[warmup:] for times in per_rank]),
            overhead_s=max(overheads),
            reported_s=[sum(times) / 1e6 for times in per_rank],
            observed_s=[commit.committed_at[r.rank] - commit.sent_at for r in timed],
            commit=commit,
            replies=replies,
        )

    def _check_commitments(self, timed: _Round) -> None:
        """Each checked output is the one its call committed to, digest for digest."""
        commit = timed.commit
        for reply in sorted(timed.replies, key=lambda r: r.rank):
            if reply.kind != "judge":
                continue
            shipped = reply.data.get("digests") or []
            committed = commit.digests[reply.rank]
            for k, call in enumerate(commit.checked):
                if k < len(shipped) and shipped[k] == committed[call]:
                    continue
                why = (
                    f"rank {reply.rank}: the output shipped for timed call {call} of a round "
                    "is not the one the call committed to"
                )
                self._flag(ResultFlag.TAMPERED, why)
                self.restart_candidates = True
                raise _Failure(
                    ProblemStatus.WRONG_ANSWER,
                    f"{why}: only bundle code that drives the harness's protocol does that",
                )

    def _check_tampering(self, timed: _Round) -> None:
        candidates = [r for r in timed.replies if r.kind == "candidate"]
        tampered = sorted({str(n) for r in candidates for n in r.data.get("tampered") or []})
        if tampered:
            self._flag(ResultFlag.TAMPERED, f"bundle code replaced {', '.join(tampered)}")
            # Whatever it patched stays patched in these processes: not for the next problem.
            self.restart_candidates = True

    def _check_clock(self, candidate: _Round, reference: list[_Round]) -> bool:
        """The parent's own clock against the times reported from the rank processes.

        What the parent observed of a round (from sending it to receiving the ranks'
        commitments, after their final synchronise) is the calls plus the harness's own
        work around them: making inputs, copies, digests, messages. That overhead is
        measured in this very case on the reference's rounds, which run the same harness
        code on the same inputs. A candidate round whose unexplained time exceeds the
        reference's largest by more than the margin spent time its reported calls do not
        show; reported calls longer than the observed round are impossible outright."""
        allowed = max(r.overhead_s for r in reference) * (1 + self.settings.clock_margin_rel)
        allowed += self.settings.clock_margin_s
        for rank, (reported, observed) in enumerate(
            zip(candidate.reported_s, candidate.observed_s, strict=True)
        ):
            hidden = observed - reported
            if reported > observed * 1.01 + 1e-3:
                why = (
                    f"rank {rank} reported {reported * 1e3:.1f} ms of calls in a round the "
                    f"evaluator saw take {observed * 1e3:.1f} ms"
                )
            elif hidden > allowed:
                why = (
                    f"rank {rank} reported {reported * 1e3:.1f} ms of calls in a round the "
                    f"evaluator saw take {observed * 1e3:.1f} ms; the harness's own work "
                    f"around the reference's calls took at most {allowed * 1e3:.1f} ms "
                    "(margin included)"
                )
            else:
                continue
            self._flag(ResultFlag.CLOCK_MISMATCH, why)
            self.restart_candidates = True
            return True
        return False

    def _speedup(self, result: CaseResult) -> None:
        pairs = result.rounds
        candidate = [p["candidate_us"] for p in pairs]
        reference = [p["reference_us"] for p in pairs]
        result.time_us = statistics.median(candidate)
        result.time_spread_us = _iqr(candidate)
        result.ref_time_us = statistics.median(reference)
        result.iterations = len(pairs) * self.calls_per_round
        ratios = [p["reference_us"] / p["candidate_us"] for p in pairs if p["candidate_us"] > 0]
        if ratios:
            result.speedup, result.speedup_low, result.speedup_high = median_interval(ratios)

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
                setattr(self.result, name, _geomean(values))
        self.result.max_abs_err = _finite(max((_num(c.max_abs_err) for c in cases), default=None))
        self.result.max_rel_err = _finite(max((_num(c.max_rel_err) for c in cases), default=None))
        apply_roofline(self.result, self.bandwidth_gbps)


@dataclass
class _Round:
    time_us: float  # the mean over timed calls of the slowest rank's time
    overhead_s: float  # the largest, over ranks, of observed minus reported
    reported_s: list[float]  # per rank: the sum of its reported call times, warm-up included
    observed_s: list[float]  # per rank: from sending the round to its commitment, parent's clock
    commit: _Commit
    replies: list[Reply]


class _Commit(Conversation):
    """A round's one question: after its last call, each rank of the timed pool (`kind`)
    commits to its timed calls' outputs (a digest each) and is told which of them the
    judge checks. The parent's clock notes when each commitment came. The round's reply,
    with the times, counts only after the commitment, and must report every call."""

    def __init__(self, checked: list[int], *, calls: int, warmup: int, kind: str) -> None:
        self.checked, self.calls, self.warmup, self.kind = sorted(checked), calls, warmup, kind
        self.sent_at = 0.0
        self.committed_at: dict[int, float] = {}
        self.digests: dict[int, list[Any]] = {}

    def answer(self, question: Reply) -> list[int]:
        now = time.monotonic()
        data, rank = question.data, question.rank
        if question.kind != self.kind or data.get("ask") != "commit" or rank in self.digests:
            raise ProtocolViolation(
                question.kind, rank, f"asked {str(data)[:80]} where one commitment was due"
            )
        digests = data.get("digests")
        timed = self.calls - self.warmup
        if not (isinstance(digests, list) and len(digests) == timed):
            raise ProtocolViolation(
                question.kind, rank, f"committed to something else than {timed} digests"
            )
        self.committed_at[rank], self.digests[rank] = now, digests
        return list(self.checked)

    def check_reply(self, reply: Reply) -> None:
        if reply.kind != self.kind or not reply.data.get("ok"):
            return  # a failure may come at any call
        if reply.rank not in self.digests:
            raise ProtocolViolation(
                reply.kind, reply.rank, "replied before committing to its outputs"
            )
        times = reply.data.get("times_us")
        if not (
            isinstance(times, list)
            and len(times) == self.calls
            and all(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in times)
        ):
            raise ProtocolViolation(
                reply.kind, reply.rank, f"reported something else than {self.calls} call times"
            )


def _observed(pair: dict[str, float], reference: _Round, candidate: _Round) -> dict[str, Any]:
    return {
        **pair,
        "reference_overhead_s": reference.overhead_s,
        "candidate_overhead_s": candidate.overhead_s,
        "reference_observed_s": max(reference.observed_s),
        "candidate_observed_s": max(candidate.observed_s),
        # The judge checks these calls while the candidate's round runs (same command).
        "candidate_checked": len(candidate.commit.checked),
    }


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else math.inf


def _max(current: float | None, new: Any) -> float | None:
    if not isinstance(new, (int, float)):
        return current
    return float(new) if current is None else max(current, float(new))


def _finite(value: float | None) -> float | None:
    # JSON has no Infinity or NaN; "unbounded" is shown by the message instead.
    return value if value is not None and math.isfinite(value) else None
