"""How a problem's time is shared among its cases' pairs (evaluator/judge/budget.py)."""

from __future__ import annotations

import dataclasses

import pytest

from evaluator.judge.budget import CaseClock, room_for_another_pair

# The last case of a 6 s problem as a CI run found it (2026-11-27): 20 ms a pair, its
# slowest 60 ms, 0.1 s left. Three paces alone (60 ms) let it go on; the next slow pair
# timed the honest bundle out.
NEAR_THE_END = CaseClock(
    left_s=0.1, timed_s=2.9, pairs=145, slowest_s=0.06, case_s=3.0, cases_after=0, timeout_s=6
)


def test_the_last_case_stops_a_safety_share_before_the_deadline():
    assert not room_for_another_pair(NEAR_THE_END)
    assert not room_for_another_pair(dataclasses.replace(NEAR_THE_END, left_s=1.1))
    assert room_for_another_pair(dataclasses.replace(NEAR_THE_END, left_s=1.2))


def test_the_safety_share_grows_with_the_problems_time():
    at_120 = dataclasses.replace(NEAR_THE_END, timeout_s=120)  # 6 s kept back, not 1 s
    assert not room_for_another_pair(dataclasses.replace(at_120, left_s=6.1))
    assert room_for_another_pair(dataclasses.replace(at_120, left_s=6.3))


def test_a_slow_pair_counts_more_than_the_pace():
    slow = dataclasses.replace(NEAR_THE_END, slowest_s=2.0, left_s=6.5)  # 3 x 2 s + 1 s
    assert not room_for_another_pair(slow)
    assert room_for_another_pair(dataclasses.replace(slow, left_s=7.1))


@pytest.mark.parametrize(("after", "room"), [(1, True), (2, True), (3, False)])
def test_each_case_to_come_keeps_as_long_as_this_one_took(after, room):
    clock = dataclasses.replace(NEAR_THE_END, left_s=10.0, case_s=3.0, cases_after=after)
    assert room_for_another_pair(clock) is room
