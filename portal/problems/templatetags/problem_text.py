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
