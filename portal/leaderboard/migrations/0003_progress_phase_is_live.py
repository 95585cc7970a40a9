"""A submission's progress phase is a live column (triggers.LIVE_COLUMNS): PostgreSQL's
trigger on submissions ignores updates of it alone. Installing again is idempotent."""

from __future__ import annotations

from django.db import migrations

from portal.leaderboard import triggers


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0002_notify_on_change"),
        ("submissions", "0008_live_progress"),
    ]

    operations = [migrations.RunPython(triggers.install, migrations.RunPython.noop, elidable=False)]
