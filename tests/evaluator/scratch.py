"""Folders for evaluations in tests that bundle code (the candidate user) must reach."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluator.host.settings import load_settings


@contextmanager
def reachable_folder(name: str, *, candidates_write: bool = False) -> Iterator[Path]:
    """A fresh folder under the temporary folder that the candidate user may pass through
    (and, with `candidates_write`, owns), removed afterwards.

    Not pytest's tmp_path: pytest makes /tmp/pytest-of-<user> 0700 again whenever any
    pytest session starts, which would cut bundle code (nobody, when the tests run as
    root) off from a folder below it in the middle of a run."""
    folder = Path(tempfile.mkdtemp(prefix=f"pkb-test-{name}-"))
    folder.chmod(0o711)
    identity = load_settings({}).candidate_user
    if candidates_write and identity is not None:
        os.chown(folder, identity.uid, identity.gid)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
