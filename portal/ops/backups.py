"""Backup and restore of stored bundles, checked against the hashes in the database.

A backup is a plain tar (bundles are compressed archives already) of every stored bundle
under its storage name, with a manifest of names and SHA-256s. A restore writes back only
files that the database names and whose bytes match the hash recorded at upload: restore
the database first, then the bundles. The database itself is backed up with pg_dump
(README, "Running in production").
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import ContentFile

from portal.submissions.models import Submission

MANIFEST = "manifest.json"


@dataclass
class BackupReport:
    saved: int = 0
    missing: list[int] = field(default_factory=list)  # deleted by retention, or lost
    corrupt: list[int] = field(default_factory=list)  # bytes that do not match the hash


@dataclass
class RestoreReport:
    restored: int = 0
    present: int = 0  # already there with the right bytes
    refused: list[str] = field(default_factory=list)  # unknown names or wrong bytes


def _storage():
    return Submission._meta.get_field("bundle").storage


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    archive.addfile(info, io.BytesIO(data))


def bundles_backup(*, path: Path) -> BackupReport:
    """Write every stored bundle to a tar at `path` (written aside, then renamed)."""
    report = BackupReport()
    manifest: dict[str, str] = {}
    partial = path.with_name(path.name + ".partial")
    storage = _storage()
    with tarfile.open(partial, "w") as archive:
        rows = Submission.objects.exclude(bundle="").order_by("pk")
        for pk, name, sha256 in rows.values_list("pk", "bundle", "bundle_sha256"):
            try:
                with storage.open(name, "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                report.missing.append(pk)
                continue
            if hashlib.sha256(data).hexdigest() != sha256:
                report.corrupt.append(pk)
                continue
            _add(archive, name, data)
            manifest[name] = sha256
            report.saved += 1
        _add(archive, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    os.replace(partial, path)
    return report


def bundles_restore(*, path: Path) -> RestoreReport:
    """Put back the bundles of a backup that the database knows, byte for byte."""
    report = RestoreReport()
    expected = dict(Submission.objects.exclude(bundle="").values_list("bundle", "bundle_sha256"))
    storage = _storage()
    with tarfile.open(path, "r") as archive:
        for member in archive:
            if member.name == MANIFEST:
                continue
            # Only names the database holds: a member's name never chooses where it lands.
            sha256 = expected.get(member.name)
            handle = archive.extractfile(member) if member.isfile() else None
            data = handle.read() if handle and sha256 else b""
            if not sha256 or hashlib.sha256(data).hexdigest() != sha256:
                report.refused.append(member.name)
                continue
            if storage.exists(member.name):
                with storage.open(member.name, "rb") as current:
                    if hashlib.sha256(current.read()).hexdigest() == sha256:
                        report.present += 1
                        continue
                storage.delete(member.name)
            storage.save(member.name, ContentFile(data))
            report.restored += 1
    return report
