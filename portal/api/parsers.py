"""The API's JSON parser: DRF's, except that a body nested too deeply is a 400 that says so.

Python's json module recurses once per level of nesting: `[` x 5000 raises RecursionError,
which DRF does not catch (it catches ValueError only), so the request was a 500.
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                "JSON parse error - the body is nested too deeply; no field of the API "
                "nests more than a few levels."
            ) from None
