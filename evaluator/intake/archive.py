"""Unpacks an upload into its members, in memory, before anything reads their names.

An upload is a .zip, a .tar.gz or one bare `.py` file. Each member's size is counted while
it is decompressed, never taken from headers, against caps per member, per bundle and on
the compression ratio; links, devices and encrypted members are refused, and whatever the
stdlib raises on corrupt data becomes a BundleError. The members' names, the bundle's
layout and its sources are checked next, by evaluator/intake/bundle.py, which re-exports
BundleError and the caps.
"""

from __future__ import annotations

import io
import lzma
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

MAX_BUNDLE_BYTES = 4 * 1024 * 1024
MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 8 * 1024 * 1024
# Source code compresses about 4:1; a member of zeros, 1000:1. The ratio is only checked
# past a size where it matters, so a tiny file of blanks is not an "archive bomb".
MAX_RATIO = 100
RATIO_CHECK_FROM_BYTES = 64 * 1024

_READ_CHUNK = 64 * 1024
# A tar stream adds a 512-byte header per member, padding, pax records and the end blocks.
_MAX_TAR_STREAM = MAX_TOTAL_BYTES + 1024 * 1024
# What zipfile and tarfile raise on corrupt input besides their own errors (measured by the
# upload fuzzer, tests/redteam/test_upload_fuzz.py): a name flagged UTF-8 that is not
# (UnicodeDecodeError, a ValueError), a header offset before the file's start ("negative
# seek value"), a corrupt LZMA or bzip2 stream, a truncated header field.
_ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
    OSError,
    ValueError,
    struct.error,
    IndexError,
    KeyError,
    OverflowError,
)


# Defined here, not in evaluator/intake/bundle.py, because every check raises it and the
# bundle's module imports this one (not the other way round).
class BundleError(ValueError):
    """The upload is not an acceptable bundle; the message is meant for its author."""

    def __init__(self, message: str) -> None:
        # tarfile reads a name that is not UTF-8 with surrogate escapes, which no web page
        # or JSON body can carry (a 500 where the message is shown): spell them \udcff.
        super().__init__(message.encode("utf-8", "backslashreplace").decode("utf-8"))


@dataclass(frozen=True)
class Member:
    """One entry of the archive, under the name it gave itself (not yet checked)."""

    name: str
    is_dir: bool
    data: bytes


def read_members(filename: str, data: bytes) -> list[Member]:
    """The members of an uploaded archive (or of one bare .py file), or raise BundleError."""
    if not data:
        raise BundleError(f"{filename} is empty")
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(
            f"{filename} is {len(data)} bytes; a bundle may be at most {MAX_BUNDLE_BYTES} bytes"
        )
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return list(_zip_members(data))
    if data.startswith(b"\x1f\x8b"):
        return list(_tar_members(data))
    if filename.lower().endswith(".py"):
        return [_single_file(filename, data)]
    raise BundleError(f"{filename} is not a .zip or .tar.gz archive")


def _single_file(filename: str, data: bytes) -> Member:
    """A bare Python file: the bundle of that one file, under its own name."""
    if not filename.endswith(".py") or filename.startswith("_"):
        raise BundleError(
            f"{filename}: a single Python file must be named <problem-slug>.py, e.g. all-reduce.py"
        )
    if len(data) > MAX_MEMBER_BYTES:
        raise BundleError(f"{filename}: larger than {MAX_MEMBER_BYTES} bytes")
    return Member(filename, False, data)


def _zip_members(data: bytes) -> Iterator[Member]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            _check_count(len(infos))
            total = 0
            for info in infos:
                # zipfile cuts names at a NUL; the original name keeps it.
                name = info.orig_filename
                if info.flag_bits & 0x1:
                    raise BundleError(f"{name}: encrypted members are not allowed")
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise BundleError(f"{name}: symbolic links are not allowed")
                if info.is_dir() or stat.S_ISDIR(mode):
                    yield Member(name, True, b"")
                    continue
                # Zips from most tools carry permission bits only; no type bits means a file.
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                    raise BundleError(f"{name}: only regular files and directories are allowed")
                with archive.open(info) as stream:
                    content = _read_capped(name, stream, total)
                total += len(content)
                _check_ratio(name, len(content), info.compress_size)
                yield Member(name, False, content)
    except BundleError:
        raise
    except UnicodeDecodeError:
        raise BundleError(
            "a corrupt .zip archive: a member's name is marked UTF-8 but is not valid UTF-8"
        ) from None
    except _ARCHIVE_ERRORS as exc:
        raise BundleError(f"a corrupt .zip archive: {_reason(exc)}") from None


def _tar_members(data: bytes) -> Iterator[Member]:
    stream = _gunzip(data, _MAX_TAR_STREAM)
    _check_ratio("the archive", len(stream), len(data))
    try:
        with tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as archive:
            count = total = 0
            for info in archive:
                count += 1
                _check_count(count)
                name = info.name
                if info.issym():
                    raise BundleError(f"{name}: symbolic links are not allowed")
                if info.islnk():
                    raise BundleError(f"{name}: hard links are not allowed")
                if info.isdir():
                    yield Member(name, True, b"")
                    continue
                if not info.isreg() or info.issparse():
                    raise BundleError(f"{name}: only regular files and directories are allowed")
                source = archive.extractfile(info)
                if source is None:
                    raise BundleError(f"{name}: cannot be read")
                content = _read_capped(name, source, total)
                total += len(content)
                yield Member(name, False, content)
    except BundleError:
        raise
    except _ARCHIVE_ERRORS as exc:
        raise BundleError(
            f"not a .zip or .tar.gz archive: the gzip data holds no readable tar ({_reason(exc)})"
        ) from None


def _reason(exc: BaseException) -> str:
    # Some stdlib errors carry no message (a bare EOFError): name the error instead.
    return str(exc) or type(exc).__name__


def _gunzip(data: bytes, limit: int) -> bytes:
    """Decompress every gzip member of `data`, refusing to produce more than `limit` bytes."""
    out = bytearray()
    rest = data
    try:
        while True:
            inflater = zlib.decompressobj(wbits=31)
            pending = rest
            while not inflater.eof:
                chunk = inflater.decompress(pending, _READ_CHUNK)
                pending = inflater.unconsumed_tail
                out += chunk
                if len(out) > limit:
                    raise BundleError(f"the archive unpacks to more than {limit} bytes")
                if not chunk and not pending:
                    raise BundleError("the .tar.gz archive is truncated")
            rest = inflater.unused_data
            if not rest.strip(b"\0"):
                return bytes(out)
    except zlib.error as exc:
        raise BundleError(f"the .tar.gz archive is corrupt: {exc}") from None


def _read_capped(name: str, stream: IO[bytes], total_so_far: int) -> bytes:
    content = bytearray()
    while chunk := stream.read(_READ_CHUNK):
        content += chunk
        if len(content) > MAX_MEMBER_BYTES:
            raise BundleError(f"{name}: larger than {MAX_MEMBER_BYTES} bytes uncompressed")
        if total_so_far + len(content) > MAX_TOTAL_BYTES:
            raise BundleError(f"the bundle unpacks to more than {MAX_TOTAL_BYTES} bytes")
    return bytes(content)


def _check_count(count: int) -> None:
    if count > MAX_MEMBERS:
        raise BundleError(f"the bundle has more than {MAX_MEMBERS} members")


def _check_ratio(name: str, size: int, compressed: int) -> None:
    if size >= RATIO_CHECK_FROM_BYTES and size > MAX_RATIO * max(compressed, 1):
        raise BundleError(
            f"{name}: compresses more than {MAX_RATIO}:1 ({size} bytes from {compressed}), "
            "which looks like an archive bomb"
        )
