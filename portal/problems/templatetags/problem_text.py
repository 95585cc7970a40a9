"""Problem descriptions are plain text with `code` spans, as in the catalog's docstrings."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_CODE = re.compile(r"`([^`\n]+)`")


@register.filter
def inline_code(text: str) -> SafeString:
    # Escaped first, so the only markup in the result is the <code> added here.
    return mark_safe(_CODE.sub(r"<code>\1</code>", escape(text)))


@register.filter
def byte_size(value: int | None) -> str:
    """Bytes in binary units, as the bench tables write them: 512 B, 2.0 MiB, 1.5 GiB."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "–"
    size, unit = float(value), "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    return f"{value} B" if unit == "B" else f"{size:.1f} {unit}"


@register.filter
def at(mapping: object, key: object) -> object:
    """`sizes|at:w`: a JSON mapping's value by a key that may be an int (JSON keys are str)."""
    return mapping.get(str(key)) if isinstance(mapping, dict) else None
