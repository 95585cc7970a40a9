"""Formats of the boards' numbers."""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from portal.leaderboard.scoring import RULE, Score
from portal.submissions.templatetags.results import speedup

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


# The whitespace around it is the template loop's that it replaced: the page is byte for byte
# the same.
CATEGORY_CELL = (
    '\n          <td class="num cat" title="{}">{}<span class="solved">{}</span></td>\n        '
)


@register.filter
def category_cells(scores: Iterable[Score], weighted: bool) -> SafeString:
    """A board row's cell per category. Made here, not by a loop in the row's template: the
    loop took 145 of the 180 ms that rendering a page of 50 rows with 12 categories took
    (2026-11-28, docs/measurements/2026-11-28-leaderboard.md)."""
    return mark_safe("".join(_category_cell(s, weighted) for s in scores))


def _category_cell(s: Score, weighted: bool) -> str:
    solved = f"{s.solved} of {s.total}"
    title = f"fast_1 {share(s.fast_1)}{' weighted' if weighted else ''}, solved {solved}"
    if s.geomean:
        title += f", geomean {speedup(s.geomean)}"
    return format_html(CATEGORY_CELL, title, share(s.fast_1), solved)
