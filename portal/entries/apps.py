from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class EntriesConfig(AppConfig):
    name = "portal.entries"
    label = "entries"

    def ready(self) -> None:
        from portal.entries.triggers import reinstall_sqlite_triggers

        post_migrate.connect(reinstall_sqlite_triggers, dispatch_uid="entries-triggers")
