"""The canary: same code judged against itself by real gloo ranks reads in bounds and is
reported to the real Redis; a slowed copy of the reference reads out of bounds; the
bounds themselves, on numbers."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from evaluator.host import canary, liveness
from evaluator.host.profiles import get_profile
from evaluator.host.settings import SettingsError, load_settings
from evaluator.judge.canary import CaseReading, Reading, judge_same_code, within_bounds
from tests.evaluator.scratch import reachable_folder

# The reference, 10 ms slower a call: a real bundle whose pairs read far below 1.00.
SLOWED = """
import time

from problems.collective.all_reduce import solution as reference


def solution(x):
    time.sleep(0.05)  # 10 ms read 0.60x at 4 CPU ranks once calls were handed over one at a time
    return reference(x)
"""
READING_WITHIN_S = 180


class RecordingGate:
    """Stands in for Celery's consumer (tests/integration/test_canary_worker.py has a real one)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self, *, ranked: bool) -> None:
        self.calls.append("resume ranked" if ranked else "resume unranked")


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    client = liveness.client(os.environ.get("PKB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    yield client
    keys = list(client.scan_iter("pkb:canary:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def scratch(monkeypatch) -> Iterator[Path]:
    with reachable_folder("canary") as folder:
        # The judging child reads the worker's environment.
        monkeypatch.setenv("PKB_PROFILE", "cpu")
        monkeypatch.setenv("PKB_SEED_SECRET", "canary-secret-0123456789")
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(folder))
        yield folder


def test_same_code_reads_in_bounds_on_cpu_and_the_worker_reports_it(broker, scratch):
    plan = canary.canary_plan({}, "gloo")
    watch = canary.Watch(
        plan=plan,
        profile=get_profile("cpu"),
        worker="pkb-cpu@test",
        broker=lambda: broker,
        scratch_dir=scratch,
        is_busy=lambda: False,
    )
    gate = RecordingGate()
    watch.attach(gate)
    assert gate.calls == ["pause"]  # no work before the first reading
    deadline = time.monotonic() + READING_WITHIN_S
    while not watch.decided and time.monotonic() < deadline:
        watch.tick()
        time.sleep(0.2)  # the child judges meanwhile; tick only polls it
    assert watch.decided, "no reading within the deadline"
    assert watch.last["in_bounds"] is True, watch.last
    assert gate.calls == ["pause", "resume ranked"]
    [case] = watch.last["cases"]
    assert case["case"] == "n=16384" and case["pairs"] >= 8
    assert case["low"] <= case["median"] <= case["high"]
    assert abs(case["median"] - 1.0) <= plan.tolerance == 0.5
    assert watch.last["cover"] is False  # CPU: the median decides (judge/canary.py, COVER)
    stored = liveness.canary_readings(broker, "cpu", ["pkb-cpu@test"])["pkb-cpu@test"]
    assert stored == json.loads(json.dumps(watch.last))
    assert stored["host"] and stored["out_since"] is None
    assert 0 < broker.ttl(liveness.canary_key("cpu", "pkb-cpu@test")) <= plan.ttl_s
    assert not list(scratch.glob("pkb-canary-*"))  # the child's folder is gone


def test_a_slowed_copy_of_the_reference_reads_out_of_bounds(scratch):
    settings = load_settings()
    profile = dataclasses.replace(get_profile("cpu"), world_size=2)
    reading = judge_same_code(profile=profile, settings=settings, candidate_source=SLOWED)
    assert not reading.error
    [case] = reading.cases
    assert case.median < 0.5 and case.high < 1.0
    assert reading.in_bounds is False


def test_an_out_of_bounds_reading_keeps_the_worker_off_ranked_work_until_one_reads_in_bounds(
    broker, tmp_path
):
    """Off all work while the first reading is retaken; confirmed, unranked work (test,
    benchmark, profile) goes on and ranked work waits for a reading in bounds."""
    plan = canary.CanaryPlan(interval_s=1800, recheck_s=300, tolerance=0.05)
    watch = canary.Watch(
        plan=plan,
        profile=get_profile("h200x2"),
        worker="pkb-h200x2@gpu-1",
        broker=lambda: broker,
        scratch_dir=tmp_path,
    )
    gate = RecordingGate()
    watch.attach(gate)
    slow = Reading([CaseReading("n=65536", 0.93, 0.91, 0.95, 10)], tolerance=0.05)
    watch.conclude(slow.to_json())
    first = watch.last
    # Read again at once: one reading out of bounds may be chance.
    assert first["next_at"] == first["judged_at"] and not watch.decided
    watch.conclude(slow.to_json())
    assert gate.calls == ["pause", "resume unranked"] and watch.decided
    assert not watch.paused and not watch.ranked
    assert watch.last["in_bounds"] is False
    assert watch.last["out_since"] == first["judged_at"]  # since the first of the streak
    assert watch.last["next_at"] - watch.last["judged_at"] == pytest.approx(300)
    sound = Reading([CaseReading("n=65536", 1.01, 0.98, 1.03, 10)], tolerance=0.05)
    watch.conclude(sound.to_json())
    assert gate.calls == ["pause", "resume unranked", "resume ranked"]
    assert not watch.paused and watch.ranked
    assert watch.last["out_since"] is None
    assert watch.last["next_at"] - watch.last["judged_at"] == pytest.approx(1800)


def test_an_out_of_bounds_reading_that_the_retake_does_not_confirm_lets_work_in(broker, tmp_path):
    watch = canary.Watch(
        plan=canary.CanaryPlan(interval_s=1800, recheck_s=300, tolerance=0.05),
        profile=get_profile("h200x2"),
        worker="pkb-h200x2@gpu-2",
        broker=lambda: broker,
        scratch_dir=tmp_path,
    )
    gate = RecordingGate()
    watch.attach(gate)
    watch.conclude(Reading([CaseReading("n=65536", 1.02, 1.01, 1.03, 8)], 0.05).to_json())
    assert watch.last["in_bounds"] is False and watch.due <= time.monotonic()
    assert gate.calls == ["pause"] and watch.paused  # no work at all until the retake
    watch.conclude(Reading([CaseReading("n=65536", 1.01, 0.99, 1.03, 8)], 0.05).to_json())
    assert gate.calls == ["pause", "resume ranked"] and watch.strikes == 0
    # A later streak starts over: its first reading is retaken too.
    watch.conclude(Reading([CaseReading("n=65536", 0.90, 0.88, 0.92, 8)], 0.05).to_json())
    assert watch.last["next_at"] == watch.last["judged_at"] and watch.strikes == 1


def test_a_canary_that_falls_due_during_an_evaluation_waits_for_it(tmp_path):
    busy = [True]
    watch = canary.Watch(
        plan=canary.CanaryPlan(interval_s=60, recheck_s=60, tolerance=0.5),
        profile=get_profile("cpu"),
        worker="w",
        broker=lambda: None,
        scratch_dir=tmp_path,
        is_busy=lambda: busy[0],
    )
    watch.paused, watch.ranked = False, True
    gate = RecordingGate()
    watch.attach(gate)
    watch.tick()  # due: no new work, but the running evaluation goes on
    assert gate.calls == ["resume ranked", "pause"] and watch.child is None


@pytest.mark.parametrize(
    ("median", "low", "high", "inside"),
    [
        (1.01, 0.97, 1.04, True),
        (1.04, 0.99, 1.09, True),
        (0.94, 0.90, 1.01, False),  # the interval covers 1.00, the median strays 6%
        (1.02, 1.01, 1.03, False),  # within 5%, but the interval misses 1.00
        (0.50, 0.45, 0.55, False),
    ],
)
def test_bounds_on_gpus(median, low, high, inside):
    cases = [CaseReading("n=65536", median, low, high, 10)]
    assert within_bounds(cases, 0.05) is inside
    assert Reading(cases, tolerance=0.05).in_bounds is inside


@pytest.mark.parametrize(
    ("median", "low", "high", "inside"),
    [
        (1.34, 1.03, 1.57, True),  # the CI machine's reading: every pair leaning one way
        (0.80, 0.40, 1.90, True),
        (1.55, 1.20, 1.90, False),
        (0.45, 0.30, 0.60, False),  # the slowed reference
    ],
)
def test_bounds_on_cpus_are_the_medians(median, low, high, inside):
    cases = [CaseReading("n=16384", median, low, high, 8)]
    assert Reading(cases, tolerance=0.5, cover=False).in_bounds is inside


def test_a_reading_without_cases_or_with_an_error_is_out_of_bounds():
    assert Reading([], tolerance=0.05).in_bounds is False
    good = [CaseReading("n=65536", 1.0, 0.99, 1.01, 10)]
    assert Reading(good, tolerance=0.05, error="the evaluator failed").in_bounds is False


def test_canary_settings_fail_loudly():
    assert canary.canary_plan({}, "nccl") == canary.CanaryPlan(1800, 300, 0.05)
    assert canary.canary_plan({"PKB_CANARY_TOLERANCE": "0.1"}, "gloo").tolerance == 0.1
    for env in (
        {"PKB_CANARY_INTERVAL_S": "-1"},
        {"PKB_CANARY_INTERVAL_S": "half an hour"},
        {"PKB_CANARY_RECHECK_S": "0"},
        {"PKB_CANARY_TOLERANCE": "nan"},
    ):
        with pytest.raises(SettingsError):
            canary.canary_plan(env, "nccl")


def test_a_host_whose_sandbox_cannot_start_takes_no_work_of_any_kind_and_says_why(broker, tmp_path):
    """Not a clock out of bounds (unranked work would go on): every evaluation would be a
    platform fault, so both queues stop, at once (no retake), and the reading says why."""
    from evaluator.contract import SANDBOX_FAULT

    watch = canary.Watch(
        plan=canary.CanaryPlan(interval_s=1800, recheck_s=300, tolerance=0.5),
        profile=get_profile("cpu"),
        worker="pkb-cpu@host-3",
        broker=lambda: broker,
        scratch_dir=tmp_path,
    )
    gate = RecordingGate()
    watch.attach(gate)
    why = f"the evaluator failed: bundle code cannot be confined: {SANDBOX_FAULT} (bubblewrap)"
    watch.conclude(Reading([], tolerance=0.5, error=why).to_json())
    assert gate.calls == ["pause", "pause"] and watch.paused and not watch.ranked
    assert watch.due > time.monotonic() + 200  # rechecked, not retaken at once
    stored = json.loads(broker.get(liveness.canary_key("cpu", "pkb-cpu@host-3")))
    assert stored["in_bounds"] is False and SANDBOX_FAULT in stored["error"]
    watch.conclude(Reading([CaseReading("n=16384", 1.01, 0.9, 1.1, 8)], 0.5).to_json())
    assert gate.calls[-1] == "resume ranked" and not watch.paused


def test_an_evaluation_that_met_a_sandbox_fault_has_the_canary_read_at_once(broker, tmp_path):
    """Issue 50: the worker holds its work after the first such evaluation, not at the
    canary's next interval (each evaluation in between would fail the same way)."""
    from evaluator.contract import SANDBOX_FAULT

    watch = canary.Watch(
        plan=canary.CanaryPlan(interval_s=1800, recheck_s=300, tolerance=0.5),
        profile=get_profile("cpu"),
        worker="pkb-cpu@host-4",
        broker=lambda: broker,
        scratch_dir=tmp_path,
        is_busy=lambda: True,  # the evaluation that met the fault has not ended yet
    )
    watch.paused, watch.ranked, watch.due = False, True, time.monotonic() + 1800
    gate = RecordingGate()
    watch.attach(gate)
    canary.mark_fault(tmp_path)
    watch.tick()
    assert gate.calls == ["resume ranked", "pause"] and watch.paused  # no new work
    assert not canary.fault_marked(tmp_path)  # taken once
    why = f"the evaluator failed: bundle code cannot be confined: {SANDBOX_FAULT} (bubblewrap)"
    watch.conclude(Reading([], tolerance=0.5, error=why).to_json())
    assert watch.paused and gate.calls[-1] == "pause"
