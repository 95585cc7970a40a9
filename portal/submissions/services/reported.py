"""A host's reported problem result, read into the fields that the portal stores.

Shared by a submission's own evaluation and by re-runs for the ranking, which store the
same numbers (ProblemResult, ResultRun).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from evaluator.face import ContractError, cap_log
from evaluator.face import ProblemResult as ReportedResult
from portal.submissions.models import ProblemResult

MESSAGE_CAP_CHARS = 4000


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _error(value: float | None) -> float | None:
    # An infinite error is a fact worth showing; NaN is not a number to compare.
    return None if value is None or math.isnan(value) else value


def _json_safe(value: Any) -> Any:
    # jsonb has no NaN or Infinity: one such float (an infinite relative error in a case, a
    # roofline over a zero time) would make PostgreSQL refuse the whole finished message.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float as None, as jsonb requires."""
    return _json_safe(value)


def _case_rows(cases: list) -> list[dict[str, Any]]:
    return [{k: _json_safe(v) for k, v in asdict(case).items()} for case in cases]


def _flags(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise ContractError(f"flags: expected a list of strings, got {value!r}")
    # Unknown flags are kept (and keep the result off the leaderboard): a newer host may
    # know a check that this portal does not.
    return [f[:40] for f in value[:10]]


def _interval(result: ReportedResult) -> tuple[float | None, float | None, bool]:
    """The speedup's interval, and whether it is broken. An older host reports none (both
    ends absent): the speedup stays plain and counts as it did. Ends that are given but do
    not bracket a finite speedup (or are not finite) are a host's fault: dropped, and the
    result flagged, since without its interval it cannot be counted beyond noise and its
    point speedup must not count in its stead."""
    raw_low = getattr(result, "speedup_low", None)
    raw_high = getattr(result, "speedup_high", None)
    speedup = _finite(result.speedup)
    if speedup is None or (raw_low is None and raw_high is None):
        return None, None, False
    low, high = _finite(raw_low), _finite(raw_high)
    # Geometric means over cases of the ends and of the medians: rounding may cross by ulps.
    slack = 1e-9 * speedup
    if low is None or high is None or not low - slack <= speedup <= high + slack:
        return None, None, True
    return min(low, speedup), max(high, speedup), False


# What a problem result and each of its runs store of a reported result.
REPORTED_FIELDS = (
    "status", "world_size", "message", "log", "time_us", "ref_time_us", "speedup",
    "speedup_low", "speedup_high", "max_abs_err", "max_rel_err", "roofline", "flags", "cases",
)  # fmt: skip


def reported_fields(result: ReportedResult) -> dict[str, Any]:
    """The stored fields of one reported problem result, its status and numbers."""
    low, high, broken = _interval(result)
    flags = _flags(result.flags)
    if broken and ProblemResult.Flag.BAD_INTERVAL not in flags:
        flags.append(ProblemResult.Flag.BAD_INTERVAL.value)
    return {
        "status": ProblemResult.Status(str(result.status)),
        "world_size": result.world_size,
        "message": result.message[:MESSAGE_CAP_CHARS],
        "log": cap_log(result.log),
        "time_us": _finite(result.time_us),
        "ref_time_us": _finite(result.ref_time_us),
        "speedup": _finite(result.speedup),
        "speedup_low": low,
        "speedup_high": high,
        "max_abs_err": _error(result.max_abs_err),
        "max_rel_err": _error(result.max_rel_err),
        "roofline": _finite(result.roofline),
        "flags": flags,
        "cases": _case_rows(result.cases),
    }
