from __future__ import annotations

from django.core.management.base import BaseCommand

from portal.problems.services import problems_sync


class Command(BaseCommand):
    help = "Mirror the problem catalog (problems/) into the database."

    def handle(self, *args, **options) -> None:
        report = problems_sync()
        self.stdout.write(f"Problems synced: {report}")
