from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class LeaderboardConfig(AppConfig):
    name = "portal.leaderboard"
    label = "leaderboard"

    def ready(self) -> None:
        from portal.leaderboard.triggers import reinstall_sqlite_triggers

        # Not `sender=self`: post_migrate is sent only for apps with models, which this has not.
        post_migrate.connect(reinstall_sqlite_triggers, dispatch_uid="leaderboard-triggers")
