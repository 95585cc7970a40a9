"""Number formats for results: times, speedups and errors read at a glance."""

from __future__ import annotations

import math

from django import template

register = template.Library()

DASH = "—"


@register.filter
def duration_us(value: float | None) -> str:
    if value is None:
        return DASH
    if value < 1_000:
        return f"{value:.1f} µs"
    if value < 1_000_000:
        return f"{value / 1_000:.2f} ms"
    return f"{value / 1_000_000:.2f} s"


@register.filter
def speedup(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}×"


@register.filter
def error(value: float | None) -> str:
    if value is None:
        return DASH
    if math.isinf(value):
        return "∞"
    return "0" if value == 0 else f"{value:.2e}"
