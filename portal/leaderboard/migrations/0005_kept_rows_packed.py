"""Kept rows' sums packed in binary (kept.TOTALS, kept.SOLVED) instead of JSON: parsing the
floats of 1,000 rows took most of a board's build. The rows are computed again: every group
is marked."""

from django.db import migrations, models

from portal.leaderboard import triggers


def mark_everything(apps, schema_editor):
    schema_editor.execute(f"INSERT INTO {triggers.MARKS} (team_id, label) VALUES (NULL, '')")


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0004_kept_rows"),
    ]

    operations = [
        migrations.RunSQL("DELETE FROM leaderboard_keptrow", migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="keptrow",
            name="counted",
            field=models.BinaryField(),
        ),
        migrations.AlterField(
            model_name="keptrow",
            name="totals",
            field=models.BinaryField(),
        ),
        migrations.RunPython(mark_everything, migrations.RunPython.noop, elidable=False),
    ]
