"""The REST API (problems, leaderboards, submissions, teams) and team API tokens."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "portal.api"
    label = "api"

    def ready(self) -> None:
        from portal.api import (
            schema,  # noqa: F401  (registers the token scheme)
            signals,  # noqa: F401  (revokes a departed member's tokens)
        )
