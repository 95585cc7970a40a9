"""`manage.py bundles backup FILE` / `manage.py bundles restore FILE`: stored bundles."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.ops.backups import bundles_backup, bundles_restore


class Command(BaseCommand):
    help = "Back up the stored bundles to a tar file, or restore them from one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["backup", "restore"])
        parser.add_argument("file", type=Path, help="the tar file to write or read")

    def handle(self, *args, action: str, file: Path, **options) -> None:
        if action == "backup":
            self._backup(file)
        else:
            self._restore(file)

    def _backup(self, file: Path) -> None:
        report = bundles_backup(path=file)
        self.stdout.write(f"{report.saved} bundles saved to {file}")
        if report.missing:
            self.stdout.write(
                f"{len(report.missing)} bundle files absent (deleted by retention, or lost): "
                f"submissions {report.missing}"
            )
        if report.corrupt:
            raise CommandError(
                f"bundles whose bytes do not match their hash, left out: {report.corrupt}"
            )

    def _restore(self, file: Path) -> None:
        if not file.is_file():
            raise CommandError(f"{file}: no such file")
        report = bundles_restore(path=file)
        self.stdout.write(f"{report.restored} bundles restored, {report.present} already there")
        if report.refused:
            raise CommandError(
                "refused (unknown to the database, or bytes that do not match its hash): "
                + ", ".join(report.refused)
            )
