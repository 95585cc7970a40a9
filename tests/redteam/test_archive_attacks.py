"""Hostile archives: each is refused with a message naming the problem, nothing is written,
and a correct bundle (the repository's example) is accepted right after, on the same checks.

Reading is all in memory (evaluator/intake/bundle.py), so "nothing written" is checked by
evaluating the refusal with the process's working directory and a sentinel folder watched.
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from evaluator.intake.bundle import MAX_MEMBERS, BundleError, read_bundle
from tests.evaluator.archives import make_tar_gz, make_zip, tar_member

KNOWN = ("all-reduce", "all-gather")
GOOD = "import torch\n\n\ndef solution(x):\n    return x\n"
REPO = Path(__file__).resolve().parents[2]


def _zip_with(info: zipfile.ZipInfo, data: str) -> bytes:
    out = io.BytesIO(make_zip({"all-reduce.py": GOOD}))
    with zipfile.ZipFile(out, "a") as archive:
        archive.writestr(info, data)
    return out.getvalue()


def _zip_symlink() -> bytes:
    info = zipfile.ZipInfo("passwd.py")
    info.external_attr = 0o120777 << 16
    return _zip_with(info, "/etc/passwd")


def _zip_device() -> bytes:
    info = zipfile.ZipInfo("_dev.py")
    info.external_attr = 0o020666 << 16  # a character device
    return _zip_with(info, "")


@dataclass(frozen=True)
class ArchiveAttack:
    name: str
    attack: str
    filename: str
    data: bytes
    message: str  # a regular expression the refusal must match


def _cases() -> list[ArchiveAttack]:
    extra = lambda *members: make_tar_gz({"all-reduce.py": GOOD}, extra=list(members))  # noqa: E731
    return [
        ArchiveAttack(
            "traversal",
            "writes ../../evil.py",
            "b.tgz",
            make_tar_gz({"all-reduce.py": GOOD, "../../evil.py": "x"}),
            r"'\.\.' is not allowed",
        ),
        ArchiveAttack(
            "absolute-path",
            "writes /tmp/evil.py",
            "b.tgz",
            make_tar_gz({"all-reduce.py": GOOD, "/tmp/evil.py": "x"}),
            "absolute paths",
        ),
        ArchiveAttack(
            "tar-symlink",
            "a symlink to /etc/passwd",
            "b.tgz",
            extra(tar_member("passwd.py", tarfile.SYMTYPE, linkname="/etc/passwd")),
            "symbolic links",
        ),
        ArchiveAttack(
            "zip-symlink",
            "a zip member with symlink mode bits",
            "b.zip",
            _zip_symlink(),
            "symbolic links",
        ),
        ArchiveAttack(
            "hard-link",
            "a hard link to a host file",
            "b.tgz",
            extra(tar_member("shadow.txt", tarfile.LNKTYPE, linkname="/etc/shadow")),
            "hard links",
        ),
        ArchiveAttack(
            "device",
            "a character device node",
            "b.tgz",
            extra(tar_member("mem", tarfile.CHRTYPE)),
            "only regular files",
        ),
        ArchiveAttack(
            "zip-device",
            "a zip member with device mode bits",
            "b.zip",
            _zip_device(),
            "only regular files",
        ),
        ArchiveAttack(
            "fifo",
            "a named pipe",
            "b.tgz",
            extra(tar_member("pipe", tarfile.FIFOTYPE)),
            "only regular files",
        ),
        ArchiveAttack(
            "zip-bomb",
            "900 KiB of zeros at ~1000:1",
            "b.zip",
            make_zip({"all-reduce.py": GOOD, "notes.txt": bytes(900 * 1024)}),
            "archive bomb",
        ),
        ArchiveAttack(
            "tar-bomb",
            "a gzip stream expanding past every total",
            "b.tgz",
            make_tar_gz(
                {f"z{i}.txt": bytes(1000 * 1024) for i in range(6)} | {"all-reduce.py": GOOD}
            ),
            "archive bomb",
        ),
        ArchiveAttack(
            "too-many-members",
            f"{MAX_MEMBERS + 1} members",
            "b.zip",
            make_zip({f"_m{i}.py": "" for i in range(MAX_MEMBERS)} | {"all-reduce.py": GOOD}),
            "more than",
        ),
        ArchiveAttack(
            "huge-member",
            "one incompressible member over 1 MiB",
            "b.zip",
            make_zip({"all-reduce.py": GOOD, "blob.txt": os.urandom(1024 * 1024 + 1)}),
            "larger than",
        ),
        ArchiveAttack(
            "binary-python",
            "a .py file of machine code",
            "b.zip",
            make_zip({"all-reduce.py": b"\x7fELF\x02\x01\x01\x00\xff\xfe"}),
            "not valid UTF-8",
        ),
        ArchiveAttack(
            "duplicate-names",
            "two members with one name, the second to win",
            "b.tgz",
            make_tar_gz({"all-reduce.py": GOOD, "./all-reduce.py": GOOD}),
            "appears twice",
        ),
        ArchiveAttack(
            "case-duplicates",
            "names that differ only in case",
            "b.zip",
            make_zip({"all-reduce.py": GOOD, "_h.py": "", "_H.py": ""}),
            "differ only in case",
        ),
        ArchiveAttack(
            "unknown-slug",
            "a problem file the host does not know",
            "b.zip",
            make_zip({"all-reduce.py": GOOD, "secret-problem.py": GOOD}),
            "unknown problem",
        ),
        ArchiveAttack(
            "unicode-lookalike",
            "a name in another script that looks like a known one",
            "b.zip",
            make_zip({"all-reduce.py": GOOD, "_аll.py": ""}),
            "not an allowed name",
        ),
    ]


ARCHIVE_ATTACKS = _cases()


def _example_bundle() -> bytes:
    folder = REPO / "examples" / "pytorch"
    return make_zip({p.name: p.read_bytes() for p in folder.glob("*.py")})


@pytest.mark.parametrize("case", ARCHIVE_ATTACKS, ids=[c.name for c in ARCHIVE_ATTACKS])
def test_the_archive_is_refused_and_nothing_is_written(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BundleError, match=case.message):
        read_bundle(case.filename, case.data, known_slugs=KNOWN)
    assert list(tmp_path.iterdir()) == []
    slugs = [p.stem for p in (REPO / "examples" / "pytorch").glob("*.py")]
    bundle = read_bundle("example.zip", _example_bundle(), known_slugs=slugs)
    assert sorted(bundle.solutions) == sorted(slugs)
