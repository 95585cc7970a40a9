from django.db import migrations, models

EDITABLE = ("title", "category", "description")


def remember_catalog_text(apps, schema_editor):
    # Until now every sync overwrote these three, so a row's values are the catalog's
    # (an admin edit made since the last sync would be taken as the catalog's too).
    Problem = apps.get_model("problems", "Problem")
    for row in Problem.objects.all():
        row.catalog_text = {name: getattr(row, name) for name in EDITABLE}
        row.save(update_fields=["catalog_text"])


class Migration(migrations.Migration):
    dependencies = [
        ("problems", "0004_catalog_details"),
    ]

    operations = [
        migrations.AddField(
            model_name="problem",
            name="catalog_text",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
        migrations.RunPython(remember_catalog_text, migrations.RunPython.noop),
    ]
