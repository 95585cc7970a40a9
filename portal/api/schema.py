"""How drf-spectacular describes the API: the team token scheme (imported by the app's
ready()) and the error responses DRF gives on its own."""

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
    "400": ("A query parameter that is empty, unknown or no whole number.", _FIELD_ERRORS),
    "401": (
        "No credentials where they are needed, or a token that is bad, revoked or of someone "
        "who left its team (sent to any endpoint).",
        _DETAIL,
    ),
    "404": ("No such object, or not one these credentials may see.", _DETAIL),
    "429": ("Too many requests; Retry-After says when to try again.", _DETAIL),
}

_BODIES = {"400": _FIELD_ERRORS, "401": _DETAIL, "404": _DETAIL, "409": _DETAIL, "429": _DETAIL}


def document_error_responses(result, generator, request, public):
    """A drf-spectacular postprocessing hook: the errors DRF answers on its own (401 from
    authentication, 404 from lookups, 429 from throttling, 400 from a bad query parameter)
    documented on every operation they can come from, with their JSON bodies."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(_ERROR_SCHEMAS)
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            queries = [p for p in operation.get("parameters", []) if p.get("in") == "query"]
            codes = ["401", "429"] + (["404"] if "{" in path else []) + (["400"] if queries else [])
            for code in codes:
                description, schema = _ERRORS[code]
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                if code in _BODIES and "content" not in response:
                    response["content"] = {"application/json": {"schema": _BODIES[code]}}
    return result
