from __future__ import annotations

from django.core.management.base import BaseCommand

from portal.problems.services import problems_sync


class Command(BaseCommand):
    help = "Mirror the problem catalog (problems/) into the database."

    def handle(self, *args, **options) -> None:
        report = problems_sync()
        self.stdout.write(f"Problems synced: {report}")
        if report.replaced:
            # Said apart too, so that a deploy script's log shows it where warnings go.
            self.stderr.write(
                self.style.WARNING(
                    "The catalog changed fields an admin had edited; the catalog's new text "
                    f"replaced the edit: {', '.join(report.replaced)}"
                )
            )
