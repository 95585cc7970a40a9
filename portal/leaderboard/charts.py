"""Charts as inline SVG, drawn on the server: readable without JavaScript, no library.

Every chart is a step function (fast_p over p, fast_1 over time), so one path builder
serves them all. Text inside the SVG is escaped; the result is marked safe for templates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from portal.leaderboard.scoring import CURVE_MAX_P

Point = tuple[float, float]


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def _step_path(
    points: Sequence[Point], x: Callable[[float], float], y: Callable[[float], float], x_end: float
) -> str:
    """`points` are the corners (x, value) where the value changes; held until `x_end`."""
    if not points:
        return ""
    first_x, first_v = points[0]
    parts = [f"M{x(first_x):.1f},{y(first_v):.1f}"]
    for px, value in points[1:]:
        parts.append(f"H{x(px):.1f}V{y(value):.1f}")
    parts.append(f"H{x(x_end):.1f}")
    return "".join(parts)


def _reference_curve() -> list[Point]:
    """PyTorch + NCCL: every problem at 1.0x, so fast_p is 1 below p = 1 and 0 from it."""
    return [(0.0, 1.0), (1.0, 0.0)]


def _share_at(steps: Sequence[Point], p: float) -> float:
    share = steps[0][1] if steps else 0.0
    for corner, value in steps:
        if corner <= p:
            share = value
    return share


def curve_summary(steps: Sequence[Point]) -> str:
    return ", ".join(f"fast_{p} {_pct(_share_at(steps, p))}" for p in (0, 1, 2, 3))


def fast_p_sparkline(steps: Sequence[Point], *, label: str) -> SafeString:
    """A small fast_p curve (p from 0 to 4) for a leaderboard row, with the reference dashed."""
    width, height, pad = 120.0, 30.0, 2.0

    def x(p: float) -> float:
        return pad + (width - 2 * pad) * min(p, CURVE_MAX_P) / CURVE_MAX_P

    def y(share: float) -> float:
        return height - pad - (height - 2 * pad) * share

    title = escape(f"{label}: {curve_summary(steps)} (fast_p for p from 0 to 4)")
    return mark_safe(
        f'<svg class="fastp-curve" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}"'
        f' height="{height:.0f}" role="img" aria-label="{title}"><title>{title}</title>'
        f'<line class="grid" x1="{x(1):.1f}" y1="{pad}" x2="{x(1):.1f}" y2="{height - pad}"/>'
        f'<path class="reference" d="{_step_path(_reference_curve(), x, y, CURVE_MAX_P)}"/>'
        f'<path class="curve" d="{_step_path(steps, x, y, CURVE_MAX_P)}"/></svg>'
    )


# The larger charts share a frame: a plot area with a y axis from 0 to 100%.
_W, _H = 640.0, 220.0
_LEFT, _RIGHT, _TOP, _BOTTOM = 44.0, 16.0, 12.0, 34.0


def _y(share: float) -> float:
    return _H - _BOTTOM - (_H - _TOP - _BOTTOM) * share


def _frame(css_class: str, title: str, body: list[str], x_labels: list[tuple[float, str]]) -> str:
    title = escape(title)
    parts = [
        f'<svg class="chart {css_class}" viewBox="0 0 {_W:.0f} {_H:.0f}" role="img"'
        f' aria-label="{title}"><title>{title}</title>'
    ]
    for share in (0.0, 0.5, 1.0):
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{_y(share):.1f}" x2="{_W - _RIGHT}"'
            f' y2="{_y(share):.1f}"/><text class="tick" x="{_LEFT - 6}" y="{_y(share) + 4:.1f}"'
            f' text-anchor="end">{_pct(share)}</text>'
        )
    for xpos, text in x_labels:
        parts.append(
            f'<text class="tick" x="{xpos:.1f}" y="{_H - _BOTTOM + 18:.1f}"'
            f' text-anchor="middle">{escape(text)}</text>'
        )
    parts += body
    parts.append("</svg>")
    return "".join(parts)


def fast_p_chart(steps: Sequence[Point], *, label: str) -> SafeString:
    """A team's fast_p curve for p from 0 to 4, the reference's dashed."""

    def x(p: float) -> float:
        return _LEFT + (_W - _LEFT - _RIGHT) * min(p, CURVE_MAX_P) / CURVE_MAX_P

    body = [
        f'<path class="reference" d="{_step_path(_reference_curve(), x, _y, CURVE_MAX_P)}"/>',
        f'<path class="curve" d="{_step_path(steps, x, _y, CURVE_MAX_P)}"/>',
    ]
    ticks = [(x(p), f"p = {p}") for p in range(int(CURVE_MAX_P) + 1)]
    return mark_safe(_frame("fastp-chart", f"{label}: {curve_summary(steps)}", body, ticks))


def timeline_chart(
    points: Sequence[tuple[datetime, float]], *, end: datetime, label: str
) -> SafeString:
    """A share (fast_1) over time as steps, one dot per change, until `end`."""
    if not points:
        return mark_safe("")
    start = points[0][0]
    span = max((end - start).total_seconds(), 1.0)

    def x(seconds: float) -> float:
        return _LEFT + (_W - _LEFT - _RIGHT) * seconds / span

    numeric = [((when - start).total_seconds(), share) for when, share in points]
    body = [f'<path class="curve" d="{_step_path(numeric, x, _y, span)}"/>']
    for (when, share), (seconds, _) in zip(points, numeric, strict=True):
        note = escape(f"{when:%Y-%m-%d %H:%M} UTC: {_pct(share)}")
        body.append(
            f'<circle class="dot" cx="{x(seconds):.1f}" cy="{_y(share):.1f}" r="3">'
            f"<title>{note}</title></circle>"
        )
    ticks = [(x(0), f"{start:%b %-d, %H:%M}"), (x(span), f"{end:%b %-d, %H:%M}")]
    latest = points[-1][1]
    return mark_safe(_frame("timeline", f"{label}: now {_pct(latest)}", body, ticks))
