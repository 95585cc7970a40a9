"""`manage.py rescore_intervals`: stored results read again from their stored pairs of
rounds by the evaluator's current rule, nothing judged again (services/rescore.py)."""

from __future__ import annotations

import io
import math

import pytest
from django.core.management import call_command

from evaluator.contract import CaseResult
from evaluator.host.settings import default_run_spread
from evaluator.judge.stats import geomean, speedup_interval
from portal.submissions.models import ProblemResult
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import finish, passed

# Twenty pairs of alternating order, the second side 6% slower: the former rule (the
# median of the pairs, a 95% interval) read them 1.20 (1.13-1.27); the blocks 1.20 (1.20).
RATIOS = [1.2 * (1.06 if k % 2 == 0 else 1 / 1.06) for k in range(20)]


def _case(name: str, ratios: list[float], **kwargs) -> CaseResult:
    rounds = [{"reference_us": 10.0 * r, "candidate_us": 10.0} for r in ratios]
    return CaseResult(
        case=name,
        dtype="bfloat16",
        passed=True,
        speedup=1.2,
        speedup_low=1.1,
        speedup_high=1.3,
        rounds=rounds,
        **kwargs,
    )


def _judged(problems, *cases: CaseResult, profile: str = "cpu") -> ProblemResult:
    submission = SubmissionFactory(running=True, problems=["all-reduce"], profile=profile)
    assert finish(
        submission.evaluation_id, passed(speedup=1.2, low=1.1, high=1.3, cases=list(cases))
    )
    return ProblemResult.objects.get(submission=submission)


def _rescore(*args: str) -> str:
    out = io.StringIO()
    call_command("rescore_intervals", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_result_is_read_again_from_its_pairs_and_its_runs(problems):
    other = [1.0 + 0.01 * ((3 * k) % 7 - 3) for k in range(20)]
    result = _judged(problems, _case("a", RATIOS), _case("b", other))
    assert "1 runs changed (1 results)" in _rescore()
    result.refresh_from_db()
    a, b = speedup_interval(RATIOS), speedup_interval(other)
    assert a[0] == pytest.approx(1.2) and a[1] == pytest.approx(1.2)  # the order effect gone
    assert result.speedup == pytest.approx(geomean([a[0], b[0]]))
    assert result.speedup_low == pytest.approx(geomean([a[1], b[1]]))
    assert result.speedup_high == pytest.approx(geomean([a[2], b[2]]))
    run = result.runs.get()
    assert run.speedup == pytest.approx(result.speedup)
    assert [c["speedup_low"] for c in run.cases] == pytest.approx([a[1], b[1]])
    kept = [p["reference_us"] / p["candidate_us"] for p in run.cases[0]["rounds"]]
    assert kept == pytest.approx(RATIOS)  # the pairs stay as they were, in order
    assert "0 runs changed" in _rescore()  # read again: nothing moves


@pytest.mark.django_db
def test_a_dry_run_writes_nothing_and_a_case_without_pairs_keeps_its_numbers(problems):
    with_pairs = _judged(problems, _case("a", RATIOS))
    without = _judged(problems, _case("a", RATIOS), CaseResult(case="b", dtype="bf16", passed=True))
    assert "1 runs would change (1 results); 1 read and left as they were" in _rescore("--dry-run")
    for result in (with_pairs, without):
        before = (result.speedup, result.speedup_low, result.speedup_high)
        result.refresh_from_db()
        assert (result.speedup, result.speedup_low, result.speedup_high) == before
    _rescore()
    without.refresh_from_db()
    assert (without.speedup_low, without.speedup_high) == (1.1, 1.3)
    with_pairs.refresh_from_db()
    assert math.isclose(with_pairs.speedup, 1.2)


@pytest.mark.django_db
def test_a_gpu_result_takes_its_hosts_run_spread_and_a_cpu_one_none(problems):
    """A GPU host adds the spread between runs to its intervals (stats.with_run_spread);
    results judged before are read again with its default, CPU ones without."""
    gpu = _judged(problems, _case("a", RATIOS), profile="h200x2")
    cpu = _judged(problems, _case("a", RATIOS))
    _rescore()
    gpu.refresh_from_db()
    cpu.refresh_from_db()
    spread = default_run_spread("nccl")
    assert spread > 0 and default_run_spread("gloo") == 0
    assert (cpu.speedup, cpu.speedup_low, cpu.speedup_high) == pytest.approx(
        speedup_interval(RATIOS)
    )
    assert (gpu.speedup, gpu.speedup_low, gpu.speedup_high) == pytest.approx(
        speedup_interval(RATIOS, run_spread=spread)
    )
    # The pairs alone read 1.20 (1.20-1.20); the run's spread widens both ends alike.
    assert gpu.speedup_low < cpu.speedup_low <= cpu.speedup_high < gpu.speedup_high
    assert math.log(gpu.speedup / gpu.speedup_low) == pytest.approx(
        math.log(gpu.speedup_high / gpu.speedup), rel=1e-6
    )
