"""Number formats for results: times, speedups and errors read at a glance."""

from __future__ import annotations

import math

from django import template

register = template.Library()

DASH = "—"


def _is_number(value: object) -> bool:
    # Case rows are JSON: a key missing from an older row reaches a filter as "".
    return isinstance(value, int | float) and not isinstance(value, bool)


@register.filter
def duration_us(value: float | None) -> str:
    if not _is_number(value):
        return DASH
    if value < 1_000:
        return f"{value:.1f} µs"
    if value < 1_000_000:
        return f"{value / 1_000:.2f} ms"
    return f"{value / 1_000_000:.2f} s"


@register.filter
def speedup(value: float | None) -> str:
    return f"{value:.2f}×" if _is_number(value) else DASH


def _field(item: object, name: str) -> object:
    # Results are models and dataclasses; case rows are dicts.
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


@register.filter
def speedup_interval(item: object) -> str:
    """A result's speedup with its confidence interval: "1.84× (1.80–1.88)"; the speedup
    alone where no interval was reported (results of older hosts)."""
    value = _field(item, "speedup")
    low, high = _field(item, "speedup_low"), _field(item, "speedup_high")
    if not (_is_number(value) and _is_number(low) and _is_number(high)):
        return speedup(value)
    return f"{value:.2f}× ({low:.2f}–{high:.2f})"


@register.filter
def error(value: float | None) -> str:
    if not _is_number(value):
        return DASH
    if math.isinf(value):
        return "∞"
    return "0" if value == 0 else f"{value:.2e}"


@register.filter
def percent(value: float | None) -> str:
    """A fraction as a percentage; blank when there is none (a table cell left empty)."""
    if not _is_number(value):
        return ""
    pct = value * 100
    if 0 < pct < 0.1:
        return "<0.1%"
    return f"{pct:.0f}%" if pct >= 9.5 else f"{pct:.1f}%"


@register.filter
def roofline(value: float | None) -> str:
    """floor / time as a share of the link limit: "62% of link limit"."""
    return f"{percent(value)} of link limit" if _is_number(value) else DASH
