"""The model and agent entries beside a problem's ranking, without the problem's view
having to know about them."""

from __future__ import annotations

from django import template

from portal.entries.selectors import problem_entry_rows

register = template.Library()


@register.inclusion_tag("entries/_problem_entries.html")
def problem_entries(problem, profile: str) -> dict:
    return {"rows": problem_entry_rows(problem_id=problem.pk, profile=profile), "problem": problem}
