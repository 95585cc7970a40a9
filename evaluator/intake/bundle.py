"""Reads and validates an uploaded bundle before any of it runs.

A bundle is a .zip or .tar.gz holding one `<problem-slug>.py` per problem it solves (each
defining a top-level `solution`), helper modules named `_something.py`, and source files
for later native builds; a single `<problem-slug>.py` uploaded as is is a one-file bundle.
Everything is checked in memory: sizes are counted while decompressing, never taken from
headers, and no byte touches the disk until `write_to`, which refuses any path that would
land outside its destination. The archive is unpacked by evaluator/intake/archive.py
(which defines BundleError and the size caps; they are re-exported here); this module
checks what it holds: the names, the layout and the sources.

Every malformed input is a BundleError, never another exception: the archive readers turn
whatever the stdlib raises on corrupt data into one, and Python sources are measured
before they are parsed (evaluator/intake/sources.py).
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from evaluator.intake.archive import MAX_BUNDLE_BYTES as MAX_BUNDLE_BYTES
from evaluator.intake.archive import MAX_MEMBER_BYTES as MAX_MEMBER_BYTES
from evaluator.intake.archive import MAX_MEMBERS as MAX_MEMBERS
from evaluator.intake.archive import MAX_RATIO as MAX_RATIO
from evaluator.intake.archive import MAX_TOTAL_BYTES as MAX_TOTAL_BYTES
from evaluator.intake.archive import RATIO_CHECK_FROM_BYTES as RATIO_CHECK_FROM_BYTES
from evaluator.intake.archive import BundleError as BundleError
from evaluator.intake.archive import Member, read_members
from evaluator.intake.sources import MAX_PYTHON_TOKENS, SourceError, parse_python

MAX_DEPTH = 8
MAX_PATH_CHARS = 255
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h", ".c", ".md", ".txt")

_SAFE_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
_JUNK_DIRS = ("__MACOSX", "__pycache__")
_JUNK_FILES = (".DS_Store",)


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


def read_bundle(filename: str, data: bytes, *, known_slugs: Collection[str]) -> Bundle:
    """Validate an uploaded archive and return its files, or raise BundleError."""
    files = _files_of(read_members(filename, data))
    solutions = _check_sources(files, known_slugs)
    return Bundle(files=files, solutions=solutions)


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


def _files_of(members: list[Member]) -> dict[str, bytes]:
    entries: list[tuple[list[str], Member]] = []
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
