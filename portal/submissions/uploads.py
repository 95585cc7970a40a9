"""Django's temporary upload files, which a web process killed mid-upload leaves behind.

An upload larger than FILE_UPLOAD_MAX_MEMORY_SIZE is received into a named temporary file
(`tmp….upload.<ext>`) in FILE_UPLOAD_TEMP_DIR, deleted when the request ends; a process
that dies first never deletes it. The portal keeps those files in a folder of its own, and
each web process, when it starts (portal/wsgi.py), removes the ones nobody has written to
for STALE_AFTER: a live upload writes to its file every few KiB, and another process's
file removed under it is only unlinked, which Django's upload file tolerates.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(hours=1)
# Django's name for them (TemporaryUploadedFile): nothing else in the folder is touched.
PATTERN = "tmp*.upload*"


def remove_stale_uploads(*, older_than: timedelta = STALE_AFTER) -> int:
    """Delete the upload files not written to for `older_than`; how many were deleted."""
    folder = settings.FILE_UPLOAD_TEMP_DIR
    if not folder:
        return 0
    cutoff = time.time() - older_than.total_seconds()
    removed = 0
    for path in Path(folder).glob(PATTERN):
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # its own process, or another one cleaning up, got there first
    if removed:
        logger.info("removed %d stale upload file(s) from %s", removed, folder)
    return removed
