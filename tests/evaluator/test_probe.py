"""The roofline's arithmetic, with a made-up peer bandwidth (the probe itself needs GPUs)."""

from __future__ import annotations

import dataclasses

import pytest

from evaluator.contract import CaseResult, ProblemResult, ProblemStatus, ResultFlag
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.judge.evaluate import peer_bandwidth
from evaluator.judge.roofline import apply_roofline, floor_us

GBPS = 400.0  # 400 GB/s: 400,000 bytes a microsecond


def passed(*cases: tuple[int, float]) -> ProblemResult:
    return ProblemResult(
        slug="all-reduce",
        status=ProblemStatus.PASSED,
        world_size=2,
        cases=[
            CaseResult(case=f"c{i}", dtype="float32", passed=True, time_us=t, bytes_moved=b)
            for i, (b, t) in enumerate(cases)
        ],
    )


def test_the_floor_is_bytes_over_bandwidth_in_microseconds():
    assert floor_us(400_000_000, GBPS) == pytest.approx(1000.0)


def test_each_case_gets_its_floor_and_roofline_and_the_problem_their_mean():
    result = passed((400_000_000, 2000.0), (40_000_000, 400.0))
    apply_roofline(result, GBPS)
    assert [c.floor_us for c in result.cases] == pytest.approx([1000.0, 100.0])
    assert [c.roofline for c in result.cases] == pytest.approx([0.5, 0.25])
    assert result.roofline == pytest.approx(0.375)
    assert result.flags == [] and result.status == ProblemStatus.PASSED


def test_a_time_below_the_floor_flags_the_result_but_it_still_passes():
    result = passed((400_000_000, 2000.0), (400_000_000, 900.0), (400_000_000, 800.0))
    apply_roofline(result, GBPS)
    assert result.flags == [ResultFlag.BELOW_FLOOR]
    assert result.status == ProblemStatus.PASSED
    assert result.cases[2].roofline == pytest.approx(1.25)


def test_a_time_just_under_the_floor_is_within_the_noise_margin():
    result = passed((400_000_000, 960.0))
    apply_roofline(result, GBPS)
    assert result.flags == [] and result.roofline == pytest.approx(1000 / 960)


def test_without_a_measured_bandwidth_there_is_no_roofline():
    result = passed((400_000_000, 2000.0))
    apply_roofline(result, None)
    assert result.roofline is None and result.cases[0].floor_us is None and result.flags == []


def test_gloo_hosts_measure_no_peer_bandwidth():
    settings = load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"})
    profile = dataclasses.replace(get_profile("cpu"), world_size=2)
    assert peer_bandwidth(None, profile, settings) is None  # type: ignore[arg-type]
