"""Django's temporary upload files, which a web process killed mid-upload leaves behind.

An upload larger than FILE_UPLOAD_MAX_MEMORY_SIZE is received into a named temporary file
in FILE_UPLOAD_TEMP_DIR, deleted when the request ends (Django's handler also removes it
when the client goes away mid-upload); a process that dies first never deletes it. The
portal's handler (`OwnedUploadHandler`) names each file after the process that writes it
(`pkb-<pid>-<start time>-….upload.<ext>`), and each web process, when it starts
(portal/wsgi.py), removes every such file whose process is gone, whatever its age: no
request can still own it. Files without an owner in their name (Django's own `tmp….upload`,
or a pid reused since) go once nobody has written to them for STALE_AFTER: a live upload
writes every few KiB, and a file removed under a process is only unlinked, which Django's
upload file tolerates.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import TemporaryFileUploadHandler

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(hours=1)
# The names of upload files: Django's (TemporaryUploadedFile) and ours; nothing else in the
# folder is touched.
PATTERNS = ("tmp*.upload*", "pkb-*.upload*")
_OWNER = re.compile(r"pkb-(\d+)-(\d+)-")


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields count from the last ")".
    return int(stat.rsplit(")", 1)[1].split()[19])


def owner_prefix() -> str:
    pid = os.getpid()
    return f"pkb-{pid}-{process_start(pid) or 0}-"


class OwnedUploadedFile(TemporaryUploadedFile):
    """Django's temporary upload file, named after the process that receives it."""

    def __init__(self, name, content_type, size, charset, content_type_extra=None):
        ext = os.path.splitext(name)[1]
        file = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed with the upload)
            prefix=owner_prefix(), suffix=".upload" + ext, dir=settings.FILE_UPLOAD_TEMP_DIR
        )
        UploadedFile.__init__(self, file, name, content_type, size, charset, content_type_extra)


class OwnedUploadHandler(TemporaryFileUploadHandler):
    def new_file(self, *args, **kwargs) -> None:
        super(TemporaryFileUploadHandler, self).new_file(*args, **kwargs)
        self.file = OwnedUploadedFile(
            self.file_name, self.content_type, 0, self.charset, self.content_type_extra
        )


def _orphaned(path: Path) -> bool:
    """The file names a process that is gone (its pid free, or another process's now)."""
    owner = _OWNER.match(path.name)
    if owner is None:
        return False
    pid, started = int(owner[1]), int(owner[2])
    if not started:  # written where /proc does not say when a process started: age only
        return False
    return pid != os.getpid() and process_start(pid) != started


def remove_stale_uploads(*, older_than: timedelta = STALE_AFTER) -> int:
    """Delete the upload files whose process is gone, and those not written to for
    `older_than`; how many were deleted."""
    folder = settings.FILE_UPLOAD_TEMP_DIR
    if not folder:
        return 0
    cutoff = time.time() - older_than.total_seconds()
    removed = 0
    for pattern in PATTERNS:
        for path in Path(folder).glob(pattern):
            try:
                if not path.is_file() or path.is_symlink():
                    continue
                if _orphaned(path) or path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue  # its own process, or another one cleaning up, got there first
    if removed:
        logger.info("removed %d stale upload file(s) from %s", removed, folder)
    return removed
