"""How drf-spectacular describes the team token scheme (imported by the app's ready())."""

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
