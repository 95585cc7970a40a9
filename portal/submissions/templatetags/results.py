"""Number formats for results: times, speedups and errors read at a glance."""

from __future__ import annotations

import math

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal import formats
from portal.formats import DASH
from portal.formats import is_number as _is_number
from portal.leaderboard.scoring import faster_beyond_noise
from portal.submissions.models import Submission

register = template.Library()

# The site's and pkb's one convention for times (portal/formats.py).
duration_us = register.filter("duration_us", formats.duration_us)
file_size = register.filter("file_size", formats.file_size)


@register.filter
def time_quartiles(case: object) -> str:
    """A case's timed rounds' interquartile range as the interval it is, "(83.1–86.0 µs)",
    from the rounds the host reported; where a row has no rounds (older results), its width,
    "(IQR 2.9 µs)"; blank where there is neither."""
    rounds = _field(case, "rounds") or []
    times = [r["candidate_us"] for r in rounds if _is_number(r.get("candidate_us"))]
    found = formats.quartiles(times)
    if found:
        return f"({formats.duration_range_us(*found)})"
    spread = _field(case, "time_spread_us")
    return f"(IQR {formats.duration_us(spread)})" if _is_number(spread) and spread else ""


@register.filter
def sentence(text: str) -> str:
    """Text that ends as a sentence does, once: an admin's reason may bring its own period."""
    text = str(text).strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


@register.filter
def speedup(value: float | None) -> str:
    return f"{value:.2f}×" if _is_number(value) else DASH


def _field(item: object, name: str) -> object:
    # Results are models and dataclasses; case rows are dicts.
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


@register.filter
def faster(item: object) -> bool:
    """Marked faster: beyond noise, as the board counts it (its whole interval above 1)."""
    speedup, low = _field(item, "speedup"), _field(item, "speedup_low")
    if not _is_number(speedup):
        return False
    return faster_beyond_noise(float(speedup), float(low) if _is_number(low) else None)


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
    """An absolute or relative error to three significant digits, as a wrong answer's
    message writes it (evaluator/judge/compare.py), so both read the same."""
    if not _is_number(value):
        return DASH
    if math.isinf(value):
        return "∞"
    return f"{value:.3g}"


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


def _none_passed(submission: object) -> bool:
    """Done, and not one problem passed: a finished evaluation, not a success."""
    if getattr(submission, "status", None) != "done":
        return False
    counted = getattr(submission, "passed_count", None)  # annotated by list selectors
    if counted is not None:
        return counted == 0
    return not submission.results.filter(status="passed").exists()  # type: ignore[attr-defined]


@register.filter
def status_class(submission: object) -> str:
    """The badge's classes: "done" is green only where something passed."""
    if _none_passed(submission):
        return "done-none-passed failed"
    return str(getattr(submission, "status", ""))


@register.filter
def status_label(submission: object) -> str:
    if _none_passed(submission):
        return "Done: none passed"
    # A running evaluation says what it does now: "Compiling" before anything is judged.
    status, phase = getattr(submission, "status", ""), getattr(submission, "progress_phase", "")
    if status == "running" and phase == "compiling":
        return "Compiling"
    return submission.get_status_display()  # type: ignore[attr-defined]


@register.filter
def mode_badge(submission: object) -> SafeString:
    """The run's mode as a badge, "ranked" included: every list says which runs count."""
    mode = str(_field(submission, "mode") or Submission.Mode.RANKED)
    known = mode in Submission.Mode.values
    label = Submission.Mode(mode).label if known else mode
    title = Submission.MODE_HELP[Submission.Mode(mode)] if known else ""
    return format_html(
        '<span class="badge mode mode-{}" title="{}">{}</span>', mode, title, label.lower()
    )
