from __future__ import annotations

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def judged_at_current_version(apps, schema_editor) -> None:
    # Nothing recorded which version older results were judged against: count them as
    # judged against today's, so that nothing already ranked leaves the board.
    ProblemResult = apps.get_model("submissions", "ProblemResult")
    Problem = apps.get_model("problems", "Problem")
    current = Problem.objects.filter(pk=OuterRef("problem_id")).values("version")[:1]
    ProblemResult.objects.update(problem_version=Subquery(current))


class Migration(migrations.Migration):
    dependencies = [
        ("problems", "0001_initial"),
        ("submissions", "0003_disqualification_and_queue"),
    ]

    operations = [
        migrations.AddField(
            model_name="problemresult",
            name="problem_version",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="submission",
            name="problem_versions",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(judged_at_current_version, migrations.RunPython.noop),
    ]
