"""Tokens of people who left their team were only refused, not revoked, and would have
worked again had the person rejoined: revoke them (portal/api/signals.py does so from now)."""

from django.db import migrations
from django.db.models import Exists, OuterRef
from django.utils import timezone


def revoke(apps, schema_editor):
    ApiToken = apps.get_model("api", "ApiToken")
    Membership = apps.get_model("accounts", "Membership")
    member = Membership.objects.filter(user_id=OuterRef("user_id"), team_id=OuterRef("team_id"))
    ApiToken.objects.filter(revoked_at__isnull=True).exclude(Exists(member)).update(
        revoked_at=timezone.now()
    )


class Migration(migrations.Migration):
    dependencies = [("api", "0001_api_tokens"), ("accounts", "0001_initial")]

    operations = [migrations.RunPython(revoke, migrations.RunPython.noop)]
