"""Bundles backed up to a tar and restored from it, checked against the database's hashes."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from portal.ops.backups import bundles_backup, bundles_restore
from tests.portal.bundles import solving
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(team) -> list:
    submissions = []
    for slug in ("all-reduce", "all-gather"):
        data = solving(slug)
        submissions.append(
            SubmissionFactory(
                team=team, bundle__data=data, bundle_sha256=hashlib.sha256(data).hexdigest()
            )
        )
    return submissions


def _bytes(submission) -> bytes:
    with submission.bundle.open("rb") as handle:
        return handle.read()


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def test_a_backup_restores_every_bundle_byte_for_byte(stored, tmp_path):
    before = {s.pk: _bytes(s) for s in stored}
    backup = tmp_path / "bundles.tar"
    call_command("bundles", "backup", str(backup), stdout=io.StringIO())
    shutil.rmtree(settings.MEDIA_ROOT)  # the disk is lost

    out = io.StringIO()
    call_command("bundles", "restore", str(backup), stdout=out)

    assert "2 bundles restored, 0 already there" in out.getvalue()
    assert {s.pk: _bytes(s) for s in stored} == before
    # Restoring twice changes nothing.
    assert bundles_restore(path=backup).present == 2


def test_a_backup_leaves_out_missing_and_corrupt_files_and_says_so(stored, tmp_path):
    missing, corrupt = stored
    Path(missing.bundle.path).unlink()
    Path(corrupt.bundle.path).write_bytes(b"bit rot")
    report = bundles_backup(path=tmp_path / "b.tar")
    assert (report.saved, report.missing, report.corrupt) == (0, [missing.pk], [corrupt.pk])
    with pytest.raises(CommandError, match="do not match their hash"):
        call_command("bundles", "backup", str(tmp_path / "c.tar"), stdout=io.StringIO())


def test_a_restore_writes_only_what_the_database_knows(stored, tmp_path):
    good, tampered = stored
    backup = tmp_path / "hostile.tar"
    with tarfile.open(backup, "w") as archive:
        _add(archive, good.bundle.name, _bytes(good))
        _add(archive, tampered.bundle.name, b"not what was uploaded")
        _add(archive, "../../escaped.py", b"print('hi')")
        _add(archive, "submissions/1/unknown.zip", b"x")
    shutil.rmtree(settings.MEDIA_ROOT)

    report = bundles_restore(path=backup)

    assert report.restored == 1
    assert sorted(report.refused) == sorted(
        [tampered.bundle.name, "../../escaped.py", "submissions/1/unknown.zip"]
    )
    assert not (Path(settings.MEDIA_ROOT).parent / "escaped.py").exists()
    assert not (Path(settings.MEDIA_ROOT) / tampered.bundle.name).exists()
    with pytest.raises(CommandError, match="refused"):
        call_command("bundles", "restore", str(backup), stdout=io.StringIO())


def test_restore_needs_an_existing_file(tmp_path, db):
    with pytest.raises(CommandError, match="no such file"):
        call_command("bundles", "restore", str(tmp_path / "absent.tar"))
