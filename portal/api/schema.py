"""How drf-spectacular describes the API: the team token scheme (imported by the app's
ready()) and the error responses DRF, and the web server in front of it, give on their own."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class TeamTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.authentication.TeamTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        # Described as bearer so that Swagger UI's "Authorize" sends it; `Token` works too.
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A team API token from the Team page: `Authorization: Bearer pkb_…` "
            "or `Authorization: Token pkb_…`.",
        }


_DETAIL = {"$ref": "#/components/schemas/ErrorDetail"}
_FIELD_ERRORS = {"$ref": "#/components/schemas/FieldErrors"}
_ERROR_SCHEMAS = {
    "ErrorDetail": {
        "type": "object",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    "FieldErrors": {
        "type": "object",
        "description": "Each refused field or query parameter, with why.",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
    },
}
_ERRORS = {
    "400": (
        "A query parameter that is empty, unknown (a value or a name the operation does not "
        "take), no whole number or given more than once.",
        _FIELD_ERRORS,
    ),
    "401": (
        "No credentials where they are needed, or a token that is bad, revoked or of someone "
        "who left its team (sent to any endpoint).",
        _DETAIL,
    ),
    "404": ("No such object, or not one these credentials may see.", _DETAIL),
    "429": ("Too many requests; Retry-After says when to try again.", _DETAIL),
}
# Answered by the web server before the request reaches the site, so not JSON: gunicorn
# (deploy/gunicorn.conf.py, limit_request_line) and runserver (65,536 bytes) both do.
_URI_TOO_LONG = (
    "Request-URI Too Long: the request line (method, path and query string) is longer "
    "than the web server reads, 4,094 bytes behind gunicorn (its `limit_request_line`). "
    "The server answers before the site sees the request, with a short HTML page, not JSON."
)

_HTML = {"type": "string"}
_BODIES = {"400": _FIELD_ERRORS, "401": _DETAIL, "404": _DETAIL, "409": _DETAIL, "429": _DETAIL}


def document_error_responses(result, generator, request, public):
    """A drf-spectacular postprocessing hook: the errors DRF answers on its own (401 from
    authentication, 404 from lookups, 429 from throttling, 400 from a bad query parameter)
    documented on every operation they can come from, with their JSON bodies; and the 414
    that the web server answers on its own for an over-long request line."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(_ERROR_SCHEMAS)
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            # 400: any operation refuses a query parameter it does not take (params.KnownQuery).
            codes = ["400", "401", "429"] + (["404"] if "{" in path else [])
            for code in codes:
                description, schema = _ERRORS[code]
                responses.setdefault(code, {"description": description})
            responses.setdefault(
                "414", {"description": _URI_TOO_LONG, "content": {"text/html": {"schema": _HTML}}}
            )
            for code, response in responses.items():
                if code in _BODIES and "content" not in response:
                    response["content"] = {"application/json": {"schema": _BODIES[code]}}
    return result
