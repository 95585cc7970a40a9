"""Times as the site and `pkb` write them: one convention, the unit always shown.

The API keeps plain numbers in microseconds (its fields end in `_us`); people read them
scaled to the unit that keeps three or four digits: 84.2 µs, 1.84 ms, 2.10 s.
"""

from __future__ import annotations

import statistics

DASH = "—"


def is_number(value: object) -> bool:
    # Case rows are JSON: a key missing from an older row reaches a filter as "".
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scale(us: float) -> tuple[float, str, str]:
    # Chosen by the rounded value, so that 999.96 µs reads 1.00 ms, never "1000.0 µs".
    if round(us, 1) < 1_000:
        return us, "µs", ".1f"
    if round(us / 1_000, 2) < 1_000:
        return us / 1_000, "ms", ".2f"
    return us / 1_000_000, "s", ".2f"


def duration_us(value: object) -> str:
    """A time given in microseconds: "84.2 µs", "1.84 ms", "2.10 s"; a dash for none."""
    if not is_number(value):
        return DASH
    scaled, unit, spec = _scale(float(value))  # type: ignore[arg-type]
    return f"{scaled:{spec}} {unit}"


def duration_range_us(low: float, high: float) -> str:
    """Two times in the unit of the higher: "83.1–86.0 µs", "0.98–1.02 ms"."""
    _, unit, spec = _scale(high)
    factor = {"µs": 1, "ms": 1_000, "s": 1_000_000}[unit]
    return f"{low / factor:{spec}}–{high / factor:{spec}} {unit}"


def quartiles(values: list[float]) -> tuple[float, float] | None:
    """The first and third quartiles, by the method the judge's interquartile range uses
    (evaluator/judge/stats.py: statistics.quantiles, inclusive)."""
    if len(values) < 2:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def file_size(size: object) -> str:
    """Bytes in binary units, as the artifacts' cap is said: "71 bytes", "8.0 MiB"."""
    if not is_number(size):
        return DASH
    n = float(size)  # type: ignore[arg-type]
    if n < 1024:
        return f"{int(n)} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / (1024 * 1024):.1f} MiB"
