"""Formats of the boards' numbers."""

from __future__ import annotations

from django import template

from portal.leaderboard.scoring import RULE

register = template.Library()


@register.simple_tag
def scoring_rule() -> str:
    """The counting rule in one sentence (scoring.RULE), for the leaderboard page."""
    return RULE


# Short enough for one narrow column per category on the overall board at 1280 px; the
# full label is the header's title and the category's own tab.
CATEGORY_ABBREVIATIONS = {
    "collective": "Coll",
    "tensor": "TP",
    "sequence": "SP",
    "context": "CP",
    "pipeline": "PP",
    "data": "DP",
    "expert": "EP",
    "fsdp": "FSDP",
    "vocab": "VP",
    "graph": "Graph",
    "geometric": "Geo",
    "other": "Other",
}


@register.filter
def category_abbr(value: str) -> str:
    return CATEGORY_ABBREVIATIONS.get(value, value)


@register.filter
def share(value: float | None) -> str:
    """A fast_p share as a whole percentage: 0%, 67%, 100%."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    return f"{value * 100:.0f}%"
