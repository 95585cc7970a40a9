"""A problem's time, shared out among its cases' pairs (`problem_run.ProblemRun._more`).

A case adds pairs past its least while its interval is wider than asked and the
problem's time allows. What it must leave:
  - for each case still to come, as long as this one has taken (trials and settling pair
    included): a first case that never settles cannot take the time its last needs;
  - three more of its own pairs at the slower of its pace and its slowest pair so far;
  - a safety share of the problem's time, at least SAFETY_MIN_S: a pair that outlasts the
    deadline times out an honest bundle, and a host's hiccup can make one pair many times
    the pace. Left 3 paces alone (60 ms at 20 ms a pair on two cores), the last case of a
    problem ran to within 70 ms of its deadline, and one slow pair on a loaded CI machine
    timed the honest bundle out (2026-11-27).
"""

from __future__ import annotations

from dataclasses import dataclass

SAFETY_SHARE = 0.05
SAFETY_MIN_S = 1.0
PAIRS_AHEAD = 3


@dataclass(frozen=True)
class CaseClock:
    """Where a case stands against its problem's deadline (all times in seconds)."""

    left_s: float  # until the problem's deadline
    timed_s: float  # since its first counted pair began
    pairs: int  # counted pairs so far
    slowest_s: float  # its slowest pair so far, any kind
    case_s: float  # since the case began (trials and settling pair included)
    cases_after: int  # the problem's cases still to come
    timeout_s: float  # the problem's whole time


def room_for_another_pair(clock: CaseClock) -> bool:
    pace = clock.timed_s / max(1, clock.pairs)
    ahead = PAIRS_AHEAD * max(pace, clock.slowest_s)
    safety = max(SAFETY_MIN_S, SAFETY_SHARE * clock.timeout_s)
    return clock.left_s > ahead + safety + clock.cases_after * clock.case_s
