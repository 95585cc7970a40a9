"""The runner on real rank processes over gloo, at world sizes 2 and 4.

Each world size evaluates one bundle once (a module-scoped fixture): two correct problems,
then a solution per way of failing, then a correct one; each test reads one result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluator.contract import ProblemResult, ProblemStatus
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator import samples
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import noted_pid_running, reachable_folder

TIMEOUT_S = 6


@pytest.fixture(scope="module", params=[2, 4], ids=["w2", "w4"])
def world_size(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def pid_dir(world_size) -> Iterator[Path]:
    # Bundle code (the candidate user) writes its notes here.
    with reachable_folder(f"pids-w{world_size}", candidates_write=True) as folder:
        yield folder


def evaluate(files: dict[str, str], slugs: list[str], world_size: int, progress=None, shared=()):
    bundle = read_bundle("b.zip", make_zip(files), known_slugs=samples.CATALOG)
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"}),
        sandbox_shared=tuple(shared),
        trials=2,
        warmup=1,
        iters=3,
        rounds=3,
        max_rounds=3,
        rotation=2,
        problem_timeout_s=TIMEOUT_S,
    )
    profile = dataclasses.replace(get_profile("cpu"), world_size=world_size)
    return evaluate_bundle(
        bundle,
        slugs=slugs,
        profile=profile,
        settings=settings,
        evaluation_id=f"test-{world_size}",
        on_progress=progress,
        problems=samples.CATALOG,
    )


SLUGS = [
    "all-reduce",
    "all-gather",
    "ar-absent",
    "ar-import-error",
    "ar-wrong",
    "ar-raises",
    "ar-all-raise",
    "ar-crashes",
    "ar-hangs",
    "ar-after-failures",
]


@pytest.fixture(scope="module")
def evaluated(world_size, pid_dir):
    """One bundle: two correct problems, then one per way of failing, then a correct one."""
    files = {
        "all-reduce.py": samples.ALL_REDUCE,
        "all-gather.py": samples.ALL_GATHER,
        "ar-import-error.py": samples.IMPORT_ERROR,
        "ar-wrong.py": samples.WRONG,
        "ar-raises.py": samples.RAISES,
        "ar-all-raise.py": samples.ALL_RAISE,
        "ar-crashes.py": samples.CRASHES,
        "ar-hangs.py": samples.HANGS,
        "ar-after-failures.py": samples.ALL_REDUCE,
        "_notes.py": samples.NOTES.format(pid_dir=str(pid_dir)),
    }
    progress = []
    results, environment = evaluate(
        files, SLUGS, world_size, lambda *args: progress.append(args), shared=[pid_dir]
    )
    return {r.slug: r for r in results}, environment, progress


@pytest.fixture(scope="module")
def passing(evaluated):
    return evaluated


@pytest.fixture(scope="module")
def failing(evaluated) -> dict[str, ProblemResult]:
    return evaluated[0]


def test_a_correct_bundle_passes_with_timings(passing, world_size):
    results, _, _ = passing
    for slug in ("all-reduce", "all-gather"):
        result = results[slug]
        assert result.status == ProblemStatus.PASSED, result.message + result.log
        assert result.world_size == world_size
        assert result.time_us > 0 and result.ref_time_us > 0 and result.speedup > 0
        assert not result.flags  # honest code: nothing to flag
        for case in result.cases:
            assert case.passed and case.iterations == 3
            assert case.time_us > 0 and case.time_spread_us >= 0 and case.ref_time_us > 0
            assert case.max_abs_err == 0.0 and case.bytes_moved > 0
    assert [c.case for c in results["all-reduce"].cases] == ["dev-fp32", "dev-bf16"]


def pids(pid_dir: Path, tag: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in pid_dir.glob(f"{tag}-*")}


def test_it_reuses_the_rank_processes_across_problems(passing, pid_dir, world_size):
    first = pids(pid_dir, "pkb_solution_all_reduce")
    assert len(first) == world_size
    assert pids(pid_dir, "pkb_solution_all_gather") == first


def test_it_restarts_the_candidate_ranks_after_a_failure(failing, pid_dir, world_size):
    after = pids(pid_dir, "pkb_solution_ar_after_failures")
    assert len(after) == world_size
    assert not after & pids(pid_dir, "pkb_solution_all_reduce")


def test_reference_and_candidate_rounds_alternate_within_the_evaluation(passing):
    """No reference time cached from another moment: every case has its own pairs of
    rounds, the side that goes first alternating; its speedup is the median of the
    crossover blocks (one pair of each order), inside its interval."""
    result = passing[0]["all-reduce"]
    for case in result.cases:
        assert len(case.rounds) == case.pairs == 3  # rounds = max_rounds = 3 here
        assert [r["first"] for r in case.rounds] == ["reference", "candidate", "reference"]
        ratios = [r["reference_us"] / r["candidate_us"] for r in case.rounds]
        # One block (the first two pairs; the third waits for its partner).
        assert case.speedup == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
        # Under 6 blocks the interval is the range of the pairs (stats.speedup_interval).
        assert (case.speedup_low, case.speedup_high) == pytest.approx((min(ratios), max(ratios)))
        assert case.ref_time_us == pytest.approx(sorted(r["reference_us"] for r in case.rounds)[1])
    assert result.speedup_low <= result.speedup <= result.speedup_high


def test_a_problem_missing_from_the_bundle_is_not_run(passing):
    result = passing[0]["ar-absent"]
    assert result.status == ProblemStatus.NOT_RUN
    assert result.message == "no ar-absent.py in the bundle"


def test_it_reports_progress_and_the_environment(passing, world_size):
    _, environment, progress = passing
    assert progress == [(i, len(SLUGS), slug) for i, slug in enumerate(SLUGS)] + [
        (len(SLUGS), len(SLUGS), "")
    ]
    assert environment["world_size"] == world_size and environment["backend"] == "gloo"
    assert {"hostname", "torch", "python", "cpu"} <= environment.keys()


def test_an_import_failure_is_a_compile_error(failing):
    result = failing["ar-import-error"]
    assert result.status == ProblemStatus.COMPILE_ERROR
    assert result.message == (
        "ar-import-error.py failed to import: NameError: name 'undefined_helper' is not defined"
    )
    assert "importing on purpose" in result.log and "Traceback" in result.log


def test_a_wrong_answer_names_rank_case_and_error(failing):
    result = failing["ar-wrong"]
    assert result.status == ProblemStatus.WRONG_ANSWER
    assert result.message.startswith("rank 0, case dev-tiny (float32): output 0: ")
    assert "elements differ; worst at index" in result.message
    assert result.max_abs_err > 0 and result.max_rel_err > 0


def test_an_exception_is_a_runtime_error_with_its_traceback(failing):
    result = failing["ar-raises"]
    assert result.status == ProblemStatus.RUNTIME_ERROR
    assert result.message == "rank 1 raised ValueError: rank 1 refuses to reduce"
    assert "Traceback" in result.log and "--- rank 1 ---" in result.log


def test_every_rank_that_raised_is_named(failing, world_size):
    result = failing["ar-all-raise"]
    assert result.status == ProblemStatus.RUNTIME_ERROR
    others = {2: "rank 1", 4: "ranks 1, 2 and 3"}[world_size]
    assert result.message == f"rank 0 raised ValueError: rank 0 refuses too ({others} failed too)"


def test_a_crashed_rank_is_a_runtime_error_naming_the_signal(failing):
    result = failing["ar-crashes"]
    assert result.status == ProblemStatus.RUNTIME_ERROR
    assert result.message == "rank 1 was killed by SIGSEGV"


def test_a_hang_times_out_and_leaves_no_process_behind(failing, pid_dir, world_size):
    result = failing["ar-hangs"]
    assert result.status == ProblemStatus.TIMEOUT
    assert result.message == f"no answer within {TIMEOUT_S} s; rank processes killed"
    ranks, children = pids(pid_dir, "hang-rank"), pids(pid_dir, "hang-grandchild")
    assert len(ranks) == len(children) == world_size
    assert [pid for pid in ranks | children if noted_pid_running(pid)] == []


def test_a_correct_problem_after_failing_ones_still_passes(failing):
    result = failing["ar-after-failures"]
    assert result.status == ProblemStatus.PASSED, result.message + result.log
    assert result.speedup > 0


def _honest_pairs(catalog: dict, evaluation_id: str, **settings: object) -> ProblemResult:
    """The honest solution of `catalog`'s one problem judged on CPU at two ranks, with one
    warm-up call and two-call rounds, at least two pairs (`settings` the rest)."""
    from tests.redteam import attacks

    (result,), _ = evaluate_bundle(
        read_bundle("b.zip", make_zip({"rt-honest.py": attacks.HONEST}), known_slugs=catalog),
        slugs=list(catalog),
        profile=dataclasses.replace(get_profile("cpu"), world_size=2),
        settings=dataclasses.replace(
            load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"}),
            trials=1,
            warmup=1,
            iters=2,
            rounds=2,
            **settings,
        ),
        evaluation_id=evaluation_id,
        problems=catalog,
    )
    return result


@pytest.mark.parametrize(
    ("target", "pairs", "settled"), [(0.0, 4, False), (100.0, 2, True)], ids=["cap", "settled"]
)
def test_pairs_are_added_until_the_interval_settles_or_the_cap(target, pairs, settled):
    """At least `rounds` pairs; then more while the interval's half-width is over the
    target share of the median, up to `max_rounds`; the case says which ended it."""
    from tests.redteam import attacks

    catalog = {"rt-honest": attacks.problem("rt-honest")}
    result = _honest_pairs(
        catalog,
        f"test-adaptive-{target}",
        max_rounds=4,
        target_halfwidth=target,
        problem_timeout_s=30,
    )
    assert result.status == ProblemStatus.PASSED, result.message
    (case,) = result.cases
    assert (case.pairs, len(case.rounds), case.settled) == (pairs, pairs, settled)
    assert [r["first"] for r in case.rounds] == ["reference", "candidate"] * (pairs // 2)


def test_a_problems_first_case_leaves_its_last_the_time_to_take_as_many_pairs():
    """Pairs past the least are added while the problem's time allows, keeping for each
    case still to come as long as this one has taken: a first case that never settles
    cannot take the time its last needs (it took all but three pairs' worth of it, and
    the last case then got its least, or a timeout)."""
    from tests.redteam import attacks

    honest = attacks.problem("rt-honest")
    cases = (honest.dev_cases[0], dataclasses.replace(honest.dev_cases[0], name="dev-tiny-2"))
    catalog = {"rt-honest": dataclasses.replace(honest, dev_cases=cases)}
    result = _honest_pairs(
        catalog,
        "test-time-share",
        max_rounds=100_000,
        target_halfwidth=0.0,  # never settles: only the time ends a case
        problem_timeout_s=6,
    )
    assert result.status == ProblemStatus.PASSED, result.message
    first, last = (case.pairs for case in result.cases)
    assert not any(case.settled for case in result.cases)
    assert first > 2 and last > 2, (first, last)  # more than the least pairs each
    assert last >= first / 3, (first, last)
