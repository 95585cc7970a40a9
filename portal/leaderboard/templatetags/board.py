"""Formats of the boards' numbers."""

from __future__ import annotations

from django import template

from portal.leaderboard.scoring import RULE

register = template.Library()


@register.simple_tag
def scoring_rule() -> str:
    """The counting rule in one sentence (scoring.RULE), for the leaderboard page."""
    return RULE


@register.filter
def share(value: float | None) -> str:
    """A fast_p share as a whole percentage: 0%, 67%, 100%."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    return f"{value * 100:.0f}%"
