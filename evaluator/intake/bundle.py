"""Reads and validates an uploaded bundle before any of it runs.

A bundle is a .zip or .tar.gz holding one `<problem-slug>.py` per problem it solves (each
defining a top-level `solution`), helper modules named `_something.py`, and source files
for later native builds; a single `<problem-slug>.py` uploaded as is is a one-file bundle.
Everything is checked in memory: sizes are counted while decompressing, never taken from
headers, and no byte touches the disk until `write_to`, which refuses any path that would
land outside its destination.

Every malformed input is a BundleError, never another exception: the archive readers turn
whatever the stdlib raises on corrupt data into one, and Python sources are measured
before they are parsed (evaluator/intake/sources.py).
"""

from __future__ import annotations

import ast
import difflib
import io
import lzma
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evaluator.intake.sources import MAX_PYTHON_TOKENS, SourceError, parse_python

MAX_BUNDLE_BYTES = 4 * 1024 * 1024
MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 8 * 1024 * 1024
# Source code compresses about 4:1; a member of zeros, 1000:1. The ratio is only checked
# past a size where it matters, so a tiny file of blanks is not an "archive bomb".
MAX_RATIO = 100
RATIO_CHECK_FROM_BYTES = 64 * 1024
MAX_DEPTH = 8
MAX_PATH_CHARS = 255
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h", ".c", ".md", ".txt")

_SAFE_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
_READ_CHUNK = 64 * 1024
# A tar stream adds a 512-byte header per member, padding, pax records and the end blocks.
_MAX_TAR_STREAM = MAX_TOTAL_BYTES + 1024 * 1024
_JUNK_DIRS = ("__MACOSX", "__pycache__")
_JUNK_FILES = (".DS_Store",)
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


class BundleError(ValueError):
    """The upload is not an acceptable bundle; the message is meant for its author."""

    def __init__(self, message: str) -> None:
        # tarfile reads a name that is not UTF-8 with surrogate escapes, which no web page
        # or JSON body can carry (a 500 where the message is shown): spell them \udcff.
        super().__init__(message.encode("utf-8", "backslashreplace").decode("utf-8"))


@dataclass(frozen=True)
class Bundle:
    files: dict[str, bytes]  # normalised relative path -> contents
    solutions: dict[str, str]  # problem slug -> file name (`<slug>.py`)

    def write_to(self, dest: Path) -> None:
        """Write every file under `dest`, creating nothing outside it and overwriting nothing."""
        root = Path(dest)
        root.mkdir(parents=True, exist_ok=True)
        root = root.resolve()
        for name, data in sorted(self.files.items()):
            parts = _safe_parts(name)
            parent = root
            for part in parts[:-1]:
                parent = parent / part
                try:
                    os.mkdir(parent, 0o755)
                except FileExistsError:
                    pass
                # lstat: a symlinked directory planted by anyone is refused, not followed.
                if not stat.S_ISDIR(os.lstat(parent).st_mode):
                    raise BundleError(f"{name}: {part} is not a plain directory")
            target = parent / parts[-1]
            if not target.resolve().is_relative_to(root):
                raise BundleError(f"{name}: resolves outside the destination")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(target, flags, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(data)


@dataclass(frozen=True)
class _Member:
    name: str
    is_dir: bool
    data: bytes


def read_bundle(filename: str, data: bytes, *, known_slugs: Collection[str]) -> Bundle:
    """Validate an uploaded archive and return its files, or raise BundleError."""
    if not data:
        raise BundleError(f"{filename} is empty")
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(
            f"{filename} is {len(data)} bytes; a bundle may be at most {MAX_BUNDLE_BYTES} bytes"
        )
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        members = list(_zip_members(data))
    elif data.startswith(b"\x1f\x8b"):
        members = list(_tar_members(data))
    elif filename.lower().endswith(".py"):
        members = [_single_file(filename, data)]
    else:
        raise BundleError(f"{filename} is not a .zip or .tar.gz archive")
    files = _files_of(members)
    solutions = _check_sources(files, known_slugs)
    return Bundle(files=files, solutions=solutions)


# --- archive formats -------------------------------------------------------------------


def _single_file(filename: str, data: bytes) -> _Member:
    """A bare Python file: the bundle of that one file, under its own name."""
    if not filename.endswith(".py") or filename.startswith("_"):
        raise BundleError(
            f"{filename}: a single Python file must be named <problem-slug>.py, e.g. all-reduce.py"
        )
    if len(data) > MAX_MEMBER_BYTES:
        raise BundleError(f"{filename}: larger than {MAX_MEMBER_BYTES} bytes")
    return _Member(filename, False, data)


def _zip_members(data: bytes) -> Iterator[_Member]:
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
                    yield _Member(name, True, b"")
                    continue
                # Zips from most tools carry permission bits only; no type bits means a file.
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                    raise BundleError(f"{name}: only regular files and directories are allowed")
                with archive.open(info) as stream:
                    content = _read_capped(name, stream, total)
                total += len(content)
                _check_ratio(name, len(content), info.compress_size)
                yield _Member(name, False, content)
    except BundleError:
        raise
    except UnicodeDecodeError:
        raise BundleError(
            "a corrupt .zip archive: a member's name is marked UTF-8 but is not valid UTF-8"
        ) from None
    except _ARCHIVE_ERRORS as exc:
        raise BundleError(f"a corrupt .zip archive: {_reason(exc)}") from None


def _tar_members(data: bytes) -> Iterator[_Member]:
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
                    yield _Member(name, True, b"")
                    continue
                if not info.isreg() or info.issparse():
                    raise BundleError(f"{name}: only regular files and directories are allowed")
                source = archive.extractfile(info)
                if source is None:
                    raise BundleError(f"{name}: cannot be read")
                content = _read_capped(name, source, total)
                total += len(content)
                yield _Member(name, False, content)
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


# --- names and layout ------------------------------------------------------------------


def _safe_parts(name: str) -> list[str]:
    """Split an archive path into checked components, or raise BundleError naming it."""
    if "\x00" in name:
        raise BundleError(f"{name!r}: names may not contain NUL bytes")
    if "\\" in name:
        raise BundleError(f"{name}: names may not contain backslashes")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise BundleError(f"{name}: absolute paths are not allowed")
    if len(name) > MAX_PATH_CHARS:
        raise BundleError(f"{name[:40]}...: path longer than {MAX_PATH_CHARS} characters")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BundleError(f"{name}: '..' is not allowed in paths")
    if not parts:
        raise BundleError(f"{name!r}: empty path")
    if len(parts) > MAX_DEPTH:
        raise BundleError(f"{name}: nested deeper than {MAX_DEPTH} folders")
    for part in parts:
        if not _SAFE_PART.fullmatch(part):
            raise BundleError(
                f"{name}: {part!r} is not an allowed name (letters, digits, _ . + - only, "
                "not starting with a dot)"
            )
    return parts


def _is_junk(name: str) -> bool:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return bool(parts) and (
        any(p in _JUNK_DIRS for p in parts[:-1])
        or parts[0] in _JUNK_DIRS
        or parts[-1] in _JUNK_FILES
    )


def _files_of(members: list[_Member]) -> dict[str, bytes]:
    entries: list[tuple[list[str], _Member]] = []
    for member in members:
        if _is_junk(member.name):
            continue
        entries.append((_safe_parts(member.name), member))

    file_parts = [parts for parts, m in entries if not m.is_dir]
    top = {parts[0] for parts in file_parts}
    # People zip a folder: one top-level folder holding everything is stripped.
    strip = len(top) == 1 and all(len(parts) > 1 for parts in file_parts)

    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for parts, member in entries:
        path = "/".join(parts[1:] if strip else parts)
        if member.is_dir:
            dirs.add(path)
            continue
        if path in files:
            raise BundleError(f"{member.name}: appears twice in the bundle")
        files[path] = member.data
        # Folders that only a file's path names are folders too: `a.py` beside `a.py/b.py`
        # would pass here and fail when written out.
        folders = path.split("/")[:-1]
        dirs.update("/".join(folders[: i + 1]) for i in range(len(folders)))
    seen: dict[str, str] = {}
    for path in [*files, *dirs]:
        if path in files and path in dirs:
            raise BundleError(f"{path}: is both a file and a folder")
        # Names are ASCII (see _SAFE_PART), so case is the only way two differ in name
        # alone: on a case-insensitive disk, or to a reader, they would be one file.
        folded = path.casefold()
        if folded in seen and seen[folded] != path:
            raise BundleError(f"{path} and {seen[folded]}: names that differ only in case")
        seen[folded] = path
    return dict(sorted(files.items()))


def _check_sources(files: dict[str, bytes], known_slugs: Collection[str]) -> dict[str, str]:
    known = sorted(known_slugs)
    solutions: dict[str, str] = {}
    tokens_left = MAX_PYTHON_TOKENS
    for path, data in files.items():
        base = path.rsplit("/", 1)[-1]
        if not base.endswith(SOURCE_SUFFIXES):
            raise BundleError(
                f"{path}: file type not allowed (allowed: {', '.join(SOURCE_SUFFIXES)})"
            )
        if not base.endswith(".py"):
            continue
        try:
            tree, tokens = parse_python(path, data, max_tokens=tokens_left)
        except SourceError as exc:
            raise BundleError(str(exc)) from None
        tokens_left -= tokens
        if base.startswith("_"):
            continue
        if "/" in path:
            raise BundleError(
                f"{path}: a problem file must sit at the top of the bundle; helper modules "
                "are named _something.py"
            )
        slug = base.removesuffix(".py")
        if slug not in known_slugs:
            raise BundleError(f"unknown problem {slug!r} ({path}); {did_you_mean(slug, known)}")
        if not _defines_solution(tree):
            raise BundleError(f"{path} defines no top-level solution function")
        solutions[slug] = path
    if not solutions:
        raise BundleError(
            "the bundle holds no <problem-slug>.py file: name each solution after its "
            f"problem's slug, as the problems page lists them (e.g. {known[0]}.py)"
            if known
            else "the bundle holds no <problem-slug>.py file"
        )
    return solutions


def closest_slugs(slug: str, known: Collection[str], *, n: int = 3) -> list[str]:
    """The known slugs nearest to a mistyped one (difflib's ratio): `allreduce` finds
    `all-reduce`. A slug that merely starts or ends like one counts too (`reduce`)."""
    close = difflib.get_close_matches(slug, known, n=n, cutoff=0.6)
    if len(close) < n and len(slug) >= 3:
        close += sorted(k for k in known if slug in k and k not in close)[: n - len(close)]
    return close


def did_you_mean(slug: str, known: Collection[str]) -> str:
    """What an unknown slug's message ends with: the nearest slugs, never all 97."""
    close = closest_slugs(slug, known)
    if close:
        return f"did you mean {', '.join(close)}?"
    return "no known problem is close: the problems page lists them"


def _defines_solution(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "solution":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "solution" for t in targets):
                return True
        if isinstance(node, ast.ImportFrom):
            if any((alias.asname or alias.name) == "solution" for alias in node.names):
                return True
    return False
