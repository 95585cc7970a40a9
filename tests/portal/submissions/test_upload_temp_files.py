"""A web process killed mid-upload leaves Django's temporary upload file behind; the next
web process to start removes it once stale, and touches nothing else in the folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from portal.submissions.uploads import STALE_AFTER, remove_stale_uploads
from tests.portal.bundles import solving

REPO = Path(__file__).resolve().parents[3]

# What Django's upload handler does with an upload past FILE_UPLOAD_MAX_MEMORY_SIZE, then
# the process is killed before the request ends.
KILLED_MID_UPLOAD = """
import os, signal, django
django.setup()
from django.core.files.uploadedfile import TemporaryUploadedFile
upload = TemporaryUploadedFile("big.zip", "application/zip", 0, None)
upload.write(b"PK" + bytes(1024))
upload.flush()
print(upload.temporary_file_path(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _python(code: str, folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PKB_UPLOAD_TEMP_DIR": str(folder), "PKB_DEBUG": "1"}
    env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_new_web_process_removes_what_a_killed_one_left(tmp_path):
    killed = _python(KILLED_MID_UPLOAD, tmp_path)
    assert killed.returncode == -signal.SIGKILL
    left = Path(killed.stdout.strip())
    assert left.parent == tmp_path and left.exists()  # the leak the issue saw
    fresh = tmp_path / "tmpfresh.upload.zip"
    fresh.write_bytes(b"an upload in progress")
    _age(left, STALE_AFTER.total_seconds() + 60)

    started = _python("import portal.wsgi", tmp_path)  # what gunicorn and runserver load
    assert started.returncode == 0, started.stderr
    assert not left.exists()
    assert fresh.exists()


def test_only_stale_upload_files_are_removed(tmp_path, settings):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    stale = tmp_path / "tmpa1b2.upload.tar.gz"
    other = tmp_path / "notes.txt"
    target = tmp_path / "keep.zip"
    link = tmp_path / "tmplink.upload"
    for path in (stale, other, target):
        path.write_bytes(b"x")
        _age(path, 2 * STALE_AFTER.total_seconds())
    link.symlink_to(target)
    assert remove_stale_uploads() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.zip", "notes.txt", "tmplink.upload"]


@pytest.mark.django_db
def test_an_upload_spilled_to_disk_is_gone_after_its_request(
    client, alice, problems, settings, tmp_path
):
    folder = tmp_path / "uploads"
    folder.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(folder)
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64  # every bundle goes through a temporary file
    client.force_login(alice)
    data = solving("all-reduce")
    response = client.post(
        reverse("submissions:submit"), {"bundle": SimpleUploadedFile("b.zip", data)}
    )
    assert response.status_code == 302
    assert list(folder.iterdir()) == []
