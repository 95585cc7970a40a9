"""Kept board rows (models.KeptRow) and the marks that say which are out of date, left by
triggers on results, submissions, teams and problems (triggers.py). Every group starts
marked, so the first board built computes them all."""

from django.db import migrations, models

from portal.leaderboard import triggers


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0003_progress_phase_is_live"),
        ("submissions", "0010_artifacts"),
        ("problems", "0005_catalog_text"),
        ("accounts", "0002_team_disqualification"),
    ]

    operations = [
        migrations.CreateModel(
            name="StaleMark",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("team_id", models.BigIntegerField(null=True)),
                ("label", models.CharField(blank=True, default="", max_length=80)),
            ],
        ),
        migrations.CreateModel(
            name="KeptRow",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("profile", models.CharField(max_length=32)),
                ("team_id", models.BigIntegerField(null=True)),
                ("label", models.CharField(blank=True, max_length=80)),
                ("name", models.CharField(max_length=200)),
                ("slug", models.CharField(blank=True, max_length=80)),
                ("totals", models.TextField()),
                ("counted", models.TextField()),
            ],
            options={
                "indexes": [
                    models.Index(fields=["profile"], name="leaderboard_profile_ce1e8f_idx")
                ],
            },
        ),
        migrations.RunPython(triggers.install_marks, triggers.uninstall_marks, elidable=False),
    ]
