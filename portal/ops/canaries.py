"""The worker hosts' canaries as the pages show them: each connected host's last reading
of same code judged against itself (evaluator/host/canary.py), and whether a queued ranked
submission waits because every host of its profile reads out of bounds (the other modes
have a queue of their own, which such a host still takes).

The readings come from the broker, written by hosts: anything malformed, stale or
unreachable reads as "no reading", never as an error page.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from portal.submissions import broker

TEXT_CAP = 200


@dataclass(frozen=True)
class CaseReading:
    case: str
    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f}x ({self.low:.2f}–{self.high:.2f})"


@dataclass(frozen=True)
class HostReading:
    worker: str
    judged_at: datetime | None = None  # None: no (usable) reading
    in_bounds: bool = False
    out_since: datetime | None = None
    cases: tuple[CaseReading, ...] = ()
    error: str = ""

    @property
    def has_reading(self) -> bool:
        return self.judged_at is not None

    @property
    def out_of_bounds(self) -> bool:
        return self.has_reading and not self.in_bounds

    @property
    def same_code(self) -> str:
        """'same code 1.01x (0.97–1.04)', per case when there are several."""
        if not self.has_reading:
            return "no reading"
        if self.error:
            return f"no same-code reading: {self.error}"
        if len(self.cases) == 1:
            return f"same code {self.cases[0]}"
        return "same code " + ", ".join(f"{c.case} {c}" for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "judged_at": self.judged_at.isoformat() if self.judged_at else None,
            "in_bounds": self.in_bounds if self.has_reading else None,
            "out_since": self.out_since.isoformat() if self.out_since else None,
            "same_code": self.same_code,
        }


def host_readings(profiles: set[str], *, now: float | None = None) -> dict[str, list[HostReading]]:
    """Per profile, its connected hosts' readings (empty when none or the broker is down)."""
    now = time.time() if now is None else now
    stored = broker.live_canaries(profiles, now=now) or {}
    return {
        profile: [
            read(worker, raw, now=now) for worker, raw in sorted(stored.get(profile, {}).items())
        ]
        for profile in profiles
    }


def held_back(profile: str) -> list[HostReading]:
    """The hosts of `profile` when it has some and every one reads out of bounds: why a
    queued submission waits. Empty otherwise (none connected says so elsewhere)."""
    hosts = host_readings({profile})[profile]
    return hosts if hosts and all(h.out_of_bounds for h in hosts) else []


def read(worker: str, raw: Any, *, now: float) -> HostReading:
    """A stored reading, checked field by field; anything off gives "no reading"."""
    worker = worker[:TEXT_CAP]
    if not isinstance(raw, dict):
        return HostReading(worker)
    judged_at, stale_after = _number(raw.get("judged_at")), _number(raw.get("stale_after"))
    in_bounds, cases = raw.get("in_bounds"), _cases(raw.get("cases"))
    if judged_at is None or not isinstance(in_bounds, bool) or cases is None:
        return HostReading(worker)
    if stale_after is None or stale_after < now:
        return HostReading(worker)
    error = raw.get("error")
    error = error[:TEXT_CAP] if isinstance(error, str) else ""
    if not (cases or error):
        return HostReading(worker)
    out_since = _number(raw.get("out_since"))
    return HostReading(
        worker=worker,
        judged_at=_when(judged_at),
        in_bounds=in_bounds,
        out_since=_when(out_since) if out_since is not None and not in_bounds else None,
        cases=cases,
        error=error,
    )


def _cases(raw: Any) -> tuple[CaseReading, ...] | None:
    if not isinstance(raw, list) or len(raw) > 16:
        return None
    cases = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("case"), str):
            return None
        numbers = [_number(item.get(k)) for k in ("median", "low", "high")]
        if any(n is None for n in numbers):
            return None
        median, low, high = (float(n or 0.0) for n in numbers)
        cases.append(CaseReading(item["case"][:TEXT_CAP], median, low, high))
    return tuple(cases)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and abs(value) < 1e12 else None


def _when(epoch_s: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(epoch_s, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
