"""The PostgreSQL trigger function also NOTIFYs at commit, when the watchers rebuild the
boards (portal/leaderboard/freshness.py). Installing again is idempotent on both engines."""

from __future__ import annotations

from django.db import migrations

from portal.leaderboard import triggers


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0001_board_version_triggers")]

    operations = [migrations.RunPython(triggers.install, migrations.RunPython.noop, elidable=False)]
