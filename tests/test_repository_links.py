"""No file of the repository points outside it: a new clone is all a reader has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Where the project's design once lived, outside the repository; docs/architecture.md now.
OUTSIDE = re.compile(r"\.\./shared\b|shared/DESIGN|\bDESIGN\.md")
# A Markdown link to a relative path: [text](path) or [text](path#anchor).
MARKDOWN_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)")


def _tracked() -> list[Path]:
    if not (REPO / ".git").exists():
        pytest.skip("needs the git repository")
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    this = Path(__file__).relative_to(REPO).as_posix()  # it names what it looks for
    return [REPO / n.decode() for n in names if n and n.decode() != this]


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None  # binary, or removed in the working tree


def test_no_file_points_outside_the_repository():
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in _tracked()
        if (text := _text(path)) is not None
        for match in OUTSIDE.finditer(text)
    ]
    assert not found, "\n".join(found)


def test_markdown_links_lead_to_files_of_the_repository():
    broken = []
    for path in _tracked():
        if path.suffix != ".md" or (text := _text(path)) is None:
            continue
        for target in MARKDOWN_LINK.findall(text):
            resolved = (path.parent / target).resolve()
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert not broken, "\n".join(broken)


def _commands(path: Path) -> list[str]:
    """The Markdown file's indented command lines, without their trailing comments."""
    lines = path.read_text().splitlines()
    commands = (line.split("  #")[0].strip() for line in lines if line.startswith("    "))
    return [" ".join(command.split()) for command in commands if command]


def test_the_pytorch_examples_readme_gives_the_main_readmes_commands():
    """The main README is the truth: every command the example's README gives is one it
    gives, word for word (the example's once zipped with a `zip` program the README says a
    new clone does without, into another file than the one it checks)."""
    example = _commands(REPO / "examples" / "pytorch" / "README.md")
    main = set(_commands(REPO / "README.md"))
    assert example, "examples/pytorch/README.md gives no command"
    assert [command for command in example if command not in main] == []
