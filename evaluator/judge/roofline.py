"""The roofline: bytes a problem must move per rank over the host's measured peer bandwidth
(`evaluator.tools.probe`) is the floor, the fastest time the links allow."""

from __future__ import annotations

import statistics

from evaluator.contract import ProblemResult, ResultFlag

# Timing noise must not flag an honest solution that runs at the limit.
BELOW_FLOOR_MARGIN = 0.95


def floor_us(bytes_moved: int, gbps: float) -> float:
    """The fastest time, in microseconds, in which links of `gbps` GB/s move these bytes."""
    return bytes_moved / (gbps * 1e3)


def apply_roofline(result: ProblemResult, gbps: float | None) -> None:
    """Give each timed case its floor and roofline, and flag times below the floor."""
    if not gbps or gbps <= 0:
        return
    rooflines = []
    for case in result.cases:
        if case.time_us is None or case.bytes_moved <= 0:
            continue
        case.floor_us = floor_us(case.bytes_moved, gbps)
        if case.time_us > 0:
            case.roofline = case.floor_us / case.time_us
            rooflines.append(case.roofline)
        if case.time_us < case.floor_us * BELOW_FLOOR_MARGIN:
            if ResultFlag.BELOW_FLOOR not in result.flags:
                result.flags.append(str(ResultFlag.BELOW_FLOOR))
    if rooflines:
        result.roofline = statistics.fmean(rooflines)
