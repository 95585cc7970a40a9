"""Builds bundle archives in memory for the tests."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Mapping

Files = Mapping[str, bytes | str]


def _bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def make_zip(files: Files, *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as archive:
        for name, data in files.items():
            archive.writestr(name, _bytes(data))
    return buf.getvalue()


def make_tar_gz(files: Files, *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    """A .tar.gz of regular files, plus any hand-made members (links, devices) in `extra`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for name, data in files.items():
            content = _bytes(data)
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        for info in extra or []:
            archive.addfile(info)
    return buf.getvalue()


def tar_member(name: str, kind: bytes, *, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info
