"""Triggers that bump the boards' data version (portal/leaderboard/freshness.py).

No model: the version is a PostgreSQL sequence, or a one-row table on SQLite, written only
by the triggers and read only by `freshness.data_version`.
"""

from __future__ import annotations

from django.db import migrations

from portal.leaderboard import triggers


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("problems", "0001_initial"),
        ("submissions", "0002_roofline_and_flags"),
    ]

    operations = [migrations.RunPython(triggers.install, triggers.uninstall, elidable=False)]
