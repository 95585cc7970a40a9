"""Publish an example bundle: a folder of the repository judged like any submission and
shown on the boards as a labelled, unranked row (README: "Example rows")."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand, CommandError

from portal.accounts.models import Team
from portal.accounts.selectors import team_of
from portal.accounts.services import TeamError, team_create
from portal.submissions.services import SubmissionError, submission_create

_SKIPPED = ("__pycache__",)


def folder_zip(folder: Path) -> bytes:
    """The folder's files as a .zip, paths relative to it; the bundle checks do the rest.

    Hidden files and caches are left out; a link is refused here, as in an upload.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if any(p.startswith(".") or p in _SKIPPED for p in relative.parts):
                continue
            if path.is_symlink():
                raise CommandError(f"{relative}: links are not allowed in a bundle")
            if path.is_file():
                archive.writestr(relative.as_posix(), path.read_bytes())
    return buffer.getvalue()


def _staff_user(username: str | None) -> User:
    users = User.objects.filter(is_active=True)
    user = (
        users.filter(username=username).first()
        if username
        else users.filter(is_superuser=True).order_by("pk").first()
    )
    if user is None:
        raise CommandError(
            f"No active user {username!r}." if username else "No superuser: pass --user."
        )
    if not user.is_staff:
        raise CommandError(f"{user.username} is not staff: examples are staff's to publish.")
    return user


class Command(BaseCommand):
    help = (
        "Zip a folder (e.g. examples/fast) and submit it as an example through the normal "
        "submission path: judged like any bundle, shown on the boards as a labelled row "
        "that takes no rank; its bundle is public."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("folder", type=Path, help="a folder of <problem-slug>.py files")
        parser.add_argument("--label", help='public label (default: "Example: <folder>")')
        parser.add_argument("--user", help="staff user who submits (default: first superuser)")
        parser.add_argument(
            "--team",
            default="Examples",
            help="team created for a user who has none (default: Examples)",
        )

    def handle(
        self, *args, folder: Path, label: str | None, user: str | None, team: str, **options
    ) -> None:
        if not folder.is_dir():
            raise CommandError(f"{folder}: not a folder")
        label = label if label is not None else f"Example: {folder.as_posix().rstrip('/')}"
        if not label.strip():
            raise CommandError("An example needs a label: it is what the boards show.")
        staff = _staff_user(user)
        data = folder_zip(folder)  # before anything is stored: a bad folder leaves nothing
        own_team, created = self._team_of(staff, team)
        upload = SimpleUploadedFile(f"{folder.resolve().name}.zip", data, "application/zip")
        try:
            submission = submission_create(user=staff, upload=upload, example_label=label)
        except SubmissionError as exc:
            if created:
                own_team.delete()  # made for this submission only
            raise CommandError(f"{folder}: {exc}") from None
        self.stdout.write(
            f"Submitted {folder} as example #{submission.pk} {label!r} of team "
            f"{own_team.name}: {', '.join(submission.problems)}, judged on {submission.profile}."
        )

    def _team_of(self, user: User, name: str) -> tuple[Team, bool]:
        # Membership is one team per user: a staff account without one gets a team of its
        # own, which never ranks since it only holds examples.
        existing = team_of(user)
        if existing is not None:
            return existing, False
        try:
            return team_create(owner=user, name=name), True
        except TeamError as exc:
            raise CommandError(f"{exc} Pass --team with another name.") from None
