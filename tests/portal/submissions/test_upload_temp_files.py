"""A web process killed mid-upload leaves its temporary upload file behind; the next web
process to start removes it at once (its owner is gone), keeps what live processes are
receiving, removes ownerless upload files once stale, and touches nothing else."""

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

from portal.submissions.uploads import STALE_AFTER, process_start, remove_stale_uploads
from tests.portal.bundles import solving

REPO = Path(__file__).resolve().parents[3]

# What Django's upload handler does with an upload past FILE_UPLOAD_MAX_MEMORY_SIZE, then
# the process is killed before the request ends.
KILLED_MID_UPLOAD = """
import os, signal, django
django.setup()
from portal.submissions.uploads import OwnedUploadedFile
upload = OwnedUploadedFile("big.zip", "application/zip", 0, None)
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


def test_a_new_web_process_removes_what_a_killed_one_left_whatever_its_age(tmp_path):
    killed = _python(KILLED_MID_UPLOAD, tmp_path)
    assert killed.returncode == -signal.SIGKILL
    left = Path(killed.stdout.strip())
    assert left.parent == tmp_path and left.exists()  # the leak the issue saw
    assert left.name.startswith("pkb-")  # named after the process that was receiving it
    fresh = tmp_path / "tmpfresh.upload.zip"  # ownerless and fresh: kept until stale
    fresh.write_bytes(b"an upload in progress")
    with subprocess.Popen(["sleep", "60"]) as alive:  # another web process, still receiving
        try:
            receiving = tmp_path / f"pkb-{alive.pid}-{process_start(alive.pid)}-x.upload.zip"
            receiving.write_bytes(b"PK")

            started = _python("import portal.wsgi", tmp_path)  # what gunicorn loads
            assert started.returncode == 0, started.stderr
            assert not left.exists()  # seconds old, and no request can own it
            assert fresh.exists() and receiving.exists()
        finally:
            alive.kill()


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


def test_an_upload_whose_client_goes_away_midway_leaves_no_file(settings, tmp_path):
    """The request dies, not the process: the handler removes its file at once."""
    import io

    from django.core.files.uploadhandler import load_handler
    from django.http.multipartparser import MultiPartParser

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    head = (
        b'--B\r\nContent-Disposition: form-data; name="bundle"; filename="b.zip"\r\n'
        b"Content-Type: application/zip\r\n\r\n"
    )
    sent = head + b"PK" + bytes(settings.FILE_UPLOAD_MAX_MEMORY_SIZE)  # spills to disk
    meta = {"CONTENT_TYPE": "multipart/form-data; boundary=B", "CONTENT_LENGTH": str(2 * len(sent))}
    handlers = [load_handler(name) for name in settings.FILE_UPLOAD_HANDLERS]
    _, files = MultiPartParser(meta, io.BytesIO(sent), handlers).parse()
    assert not files  # half a body: no file
    assert list(tmp_path.iterdir()) == []
