"""Bundles for tests, built in memory."""

from __future__ import annotations

import io
import tarfile
import zipfile

from django.core.files.uploadedfile import SimpleUploadedFile

SOLUTION = "def solution(x):\n    return x.clone()\n"


def zip_bundle(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def tar_bundle(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def solving(*slugs: str) -> bytes:
    """A valid .zip bundle with a trivial solution for each slug."""
    return zip_bundle({f"{slug}.py": SOLUTION for slug in slugs})


def upload(data: bytes, name: str = "bundle.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")
