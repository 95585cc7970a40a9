from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from evaluator.intake.bundle import MAX_BUNDLE_BYTES, MAX_MEMBERS, Bundle, BundleError, read_bundle
from tests.evaluator.archives import make_tar_gz, make_zip, tar_member

KNOWN = ("all-reduce", "all-gather")
GOOD = "import torch\n\n\ndef solution(x):\n    return x\n"


def read(filename: str, data: bytes) -> Bundle:
    return read_bundle(filename, data, known_slugs=KNOWN)


def rejects(filename: str, data: bytes, match: str) -> None:
    with pytest.raises(BundleError, match=match):
        read(filename, data)


def test_it_accepts_a_zip():
    bundle = read("b.zip", make_zip({"all-reduce.py": GOOD, "_helper.py": "X = 1\n"}))
    assert bundle.solutions == {"all-reduce": "all-reduce.py"}
    assert bundle.files == {"_helper.py": b"X = 1\n", "all-reduce.py": GOOD.encode()}


def test_it_accepts_a_tar_gz_whatever_its_name():
    data = make_tar_gz({"all-reduce.py": GOOD, "all-gather.py": GOOD, "csrc/k.cu": "//\n"})
    bundle = read("upload.bin", data)
    assert bundle.solutions == {"all-gather": "all-gather.py", "all-reduce": "all-reduce.py"}
    assert "csrc/k.cu" in bundle.files


def test_it_strips_a_single_top_level_folder():
    data = make_zip({"team/": b"", "team/all-reduce.py": GOOD, "team/README.md": "hi"})
    assert read("b.zip", data).files.keys() == {"all-reduce.py", "README.md"}


def test_it_ignores_macos_and_bytecode_junk():
    data = make_zip(
        {
            "all-reduce.py": GOOD,
            "__MACOSX/._all-reduce.py": b"\x00\x05",
            ".DS_Store": b"\x00",
            "__pycache__/all-reduce.cpython-311.pyc": b"\x00",
        }
    )
    assert read("b.zip", data).files.keys() == {"all-reduce.py"}


def test_it_rejects_an_empty_file():
    rejects("b.zip", b"", "b.zip is empty")


def test_it_rejects_bytes_that_are_no_archive():
    rejects("b.zip", b"hello, this is not an archive", r"not a \.zip or \.tar\.gz archive")


def test_it_rejects_a_truncated_zip():
    data = make_zip({"all-reduce.py": GOOD})
    rejects("b.zip", data[: len(data) // 2], "corrupt .zip")


def test_it_rejects_gzip_that_holds_no_tar():
    import gzip

    rejects("b.tgz", gzip.compress(b"plain text " * 100), r"not a \.zip or \.tar\.gz archive")


def test_it_rejects_an_oversized_archive():
    rejects("b.zip", b"PK\x03\x04" + bytes(MAX_BUNDLE_BYTES), "at most")


def test_it_rejects_too_many_members():
    files = {f"_m{i}.py": "" for i in range(MAX_MEMBERS)} | {"all-reduce.py": GOOD}
    rejects("b.zip", make_zip(files), f"more than {MAX_MEMBERS} members")
    rejects("b.tgz", make_tar_gz(files), f"more than {MAX_MEMBERS} members")


def test_it_rejects_a_member_too_large():
    big = os.urandom(1024 * 1024 + 1)  # random: no ratio check involved
    rejects("b.zip", make_zip({"all-reduce.py": GOOD, "notes.txt": big}), "notes.txt: larger")
    rejects("b.tgz", make_tar_gz({"all-reduce.py": GOOD, "notes.txt": big}), "notes.txt: larger")


def test_it_rejects_a_zip_bomb():
    data = make_zip({"all-reduce.py": GOOD, "notes.txt": bytes(900 * 1024)})
    rejects("b.zip", data, "notes.txt: compresses more than 100:1")


def test_it_rejects_a_tar_gz_bomb():
    # Members of zeros below every size limit, but the stream as a whole expands >100x.
    files = {f"z{i}.txt": bytes(1000 * 1024) for i in range(6)} | {"all-reduce.py": GOOD}
    rejects("b.tgz", make_tar_gz(files), "looks like an archive bomb")


def test_it_rejects_symlinks():
    link = tar_member("evil.py", tarfile.SYMTYPE, linkname="/etc/passwd")
    rejects("b.tgz", make_tar_gz({"all-reduce.py": GOOD}, extra=[link]), "evil.py: symbolic")

    info = zipfile.ZipInfo("evil.py")
    info.external_attr = (0o120777) << 16
    buf = make_zip({"all-reduce.py": GOOD})
    import io

    out = io.BytesIO(buf)
    with zipfile.ZipFile(out, "a") as archive:
        archive.writestr(info, "/etc/passwd")
    rejects("b.zip", out.getvalue(), "evil.py: symbolic")


def test_it_rejects_hard_links():
    link = tar_member("copy.py", tarfile.LNKTYPE, linkname="all-reduce.py")
    rejects("b.tgz", make_tar_gz({"all-reduce.py": GOOD}, extra=[link]), "copy.py: hard links")


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_it_rejects_devices_and_fifos(kind):
    node = tar_member("node", kind)
    rejects("b.tgz", make_tar_gz({"all-reduce.py": GOOD}, extra=[node]), "node: only regular")


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("/tmp/all-reduce.py", "absolute paths"),
        ("../all-reduce.py", r"'\.\.' is not allowed"),
        ("a/../../all-reduce.py", r"'\.\.' is not allowed"),
        ("a\\all-reduce.py", "backslashes"),
        (".hidden.txt", "not an allowed name"),
        ("sp ace.txt", "not an allowed name"),
    ],
)
def test_it_rejects_unsafe_names(name, match):
    rejects("b.tgz", make_tar_gz({"all-reduce.py": GOOD, name: "x"}), match)


def test_it_rejects_a_nul_in_a_zip_name():
    # zipfile will not write a NUL in a name; patch one into both copies of the name.
    data = make_zip({"all-reduce.py": GOOD, "a@b.txt": "x"}).replace(b"a@b.txt", b"a\x00b.txt")
    rejects("b.zip", data, "NUL")


def test_it_rejects_an_unknown_problem_naming_it_and_the_closest_slugs():
    rejects(
        "b.zip",
        make_zip({"allreduce.py": GOOD}),
        r"unknown problem 'allreduce' \(allreduce\.py\); did you mean all-reduce\?$",
    )
    rejects("b.zip", make_zip({"foo.py": GOOD}), "no known problem is close")


def test_did_you_mean_names_a_few_of_the_whole_catalog_never_all_of_it():
    from problems.registry import all_problems

    known = sorted(p.slug for p in all_problems())
    with pytest.raises(BundleError) as refused:
        read_bundle("b.zip", make_zip({"reducescatter.py": GOOD}), known_slugs=known)
    suggested = str(refused.value).split("did you mean ")[1].rstrip("?").split(", ")
    assert suggested[0] == "reduce-scatter" and len(suggested) <= 3
    assert set(suggested) <= set(known)


def test_it_rejects_duplicate_names():
    data = make_tar_gz({"all-reduce.py": GOOD, "./all-reduce.py": GOOD})
    rejects("b.tgz", data, "appears twice")


def test_it_rejects_python_that_is_not_utf8():
    rejects("b.zip", make_zip({"all-reduce.py": b"x = '\xff'\n"}), "all-reduce.py is not valid")


@pytest.mark.parametrize(
    "first_lines",
    [
        "# coding: utf-7\n",
        "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n",
        "# vim: set fileencoding=cp1252 :\n",
        "# coding: no-such-codec\n",
    ],
)
def test_it_rejects_a_source_that_declares_another_encoding(first_lines):
    """Python would decode it by its coding line (utf-7 hides a line in a comment), the
    site shows it as UTF-8: the code people read would not be the code that ran."""
    source = first_lines + "def solution(x):\n    return x\n"
    rejects("b.zip", make_zip({"all-reduce.py": source}), "declares the source encoding")


@pytest.mark.parametrize("declared", ["utf-8", "UTF8", "utf_8"])
def test_it_accepts_a_utf8_coding_line(declared):
    source = f"# -*- coding: {declared} -*-\ndef solution(x):\n    return x\n"
    assert read("b.zip", make_zip({"all-reduce.py": source})).solutions


def test_a_coding_word_after_the_first_statement_is_no_declaration():
    source = "import torch\n# coding: utf-7 is mentioned here\ndef solution(x):\n    return x\n"
    assert read("b.zip", make_zip({"all-reduce.py": source})).solutions


def test_it_reports_syntax_errors_with_file_line_column_and_the_line():
    source = "def solution(x):\n    return x\nx = = 1\n"
    rejects(
        "b.zip",
        make_zip({"all-reduce.py": source}),
        r"^all-reduce\.py line 3, column 5: invalid syntax: `x = = 1`$",
    )


def test_it_checks_helper_modules_parse_too():
    data = make_zip({"all-reduce.py": GOOD, "_helper.py": "def (:\n"})
    rejects("b.zip", data, "_helper.py line 1")


def test_it_requires_a_solution_function():
    data = make_zip({"all-reduce.py": "def solve(x):\n    return x\n"})
    rejects("b.zip", data, "all-reduce.py defines no top-level solution function")


def test_it_accepts_a_solution_imported_from_a_helper():
    data = make_zip({"all-reduce.py": "from _impl import fast as solution\n", "_impl.py": ""})
    assert read("b.zip", data).solutions == {"all-reduce": "all-reduce.py"}


def test_it_rejects_a_bundle_without_problem_files():
    data = make_zip({"_helper.py": "X = 1\n", "README.md": "hi"})
    rejects("b.zip", data, "the bundle holds no <problem-slug>.py file")


def test_it_rejects_other_file_types():
    rejects("b.zip", make_zip({"all-reduce.py": GOOD, "run.sh": "rm -rf /"}), "run.sh: file type")


def test_write_to_writes_every_file_inside_dest(tmp_path):
    bundle = read("b.zip", make_zip({"all-reduce.py": GOOD, "csrc/k.cu": "//"}))
    bundle.write_to(tmp_path / "out")
    assert (tmp_path / "out" / "all-reduce.py").read_text() == GOOD
    assert (tmp_path / "out" / "csrc" / "k.cu").read_text() == "//"


def test_write_to_never_writes_outside_dest(tmp_path):
    dest = tmp_path / "dest"
    for name in ("../escape.py", "/tmp/escape.py", "a/../../escape.py"):
        with pytest.raises(BundleError):
            Bundle(files={name: b"x"}, solutions={}).write_to(dest)
    assert not (tmp_path / "escape.py").exists()

    # A symlink planted inside dest is refused, not followed.
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "sub").symlink_to(outside)
    with pytest.raises(BundleError, match="not a plain directory"):
        Bundle(files={"sub/k.cu": b"x"}, solutions={}).write_to(dest)
    (dest / "f.py").symlink_to(outside / "f.py")
    with pytest.raises(BundleError, match="outside"):
        Bundle(files={"f.py": b"x"}, solutions={}).write_to(dest)
    assert list(outside.iterdir()) == []


def test_write_to_never_overwrites(tmp_path):
    (tmp_path / "all-reduce.py").write_text("old")
    with pytest.raises(FileExistsError):
        Bundle(files={"all-reduce.py": b"new"}, solutions={}).write_to(Path(tmp_path))
    assert (tmp_path / "all-reduce.py").read_text() == "old"


def test_a_single_python_file_is_a_one_file_bundle():
    bundle = read("all-reduce.py", GOOD.encode())
    assert bundle.files == {"all-reduce.py": GOOD.encode()}
    assert bundle.solutions == {"all-reduce": "all-reduce.py"}


@pytest.mark.parametrize(
    ("filename", "data", "match"),
    [
        ("_helper.py", GOOD.encode(), "must be named <problem-slug>.py"),
        ("solution.py", GOOD.encode(), "unknown problem 'solution'"),
        ("all-reduce (1).py", GOOD.encode(), "not an allowed name"),
        ("all-reduce.py", b"x = 1\n", "defines no top-level solution"),
        ("all-reduce.py", b"x" * (MAX_BUNDLE_BYTES // 4 + 1), "larger than"),
    ],
)
def test_a_single_python_file_gets_the_checks_of_a_bundles_file(filename, data, match):
    rejects(filename, data, match)


def test_a_nul_byte_is_reported_at_its_line():
    rejects(
        "b.zip",
        make_zip({"all-reduce.py": GOOD + "x = 1\n\x00\n"}),
        r"all-reduce\.py line 7: contains a NUL byte",
    )


def test_a_file_beside_a_folder_of_its_name_is_refused():
    data = make_zip({"all-reduce.py": GOOD, "_h.py": "", "_h.py/_x.py": ""})
    rejects("b.zip", data, "both a file and a folder")


@pytest.mark.parametrize("control", ["\x1c", "\x1d", "\x1e", "\x0b", "\x85"])
def test_a_control_byte_before_the_coding_line_hides_no_declaration(control):
    """str.splitlines() breaks line 1 at these where CPython does not: the coding comment
    after one is CPython's line 2 (a line checker's third), and the file would run as UTF-7
    while shown as UTF-8."""
    header = f"#!/usr/bin/env python{control}\n# -*- coding: utf-7 -*-\n"
    source = header + "def solution(x):\n    return x\n"
    rejects("b.zip", make_zip({"all-reduce.py": source}), "declares the source encoding")


@pytest.mark.parametrize("control", ["\x01", "\x08", "\x0b", "\x1b", "\x1f"])
def test_it_rejects_c0_control_characters_with_their_line(control):
    source = f"def solution(x):\n    return x  # {control}\n"
    rejects("b.zip", make_zip({"all-reduce.py": source}), "line 2: contains the control")


def test_it_accepts_tab_form_feed_and_crlf():
    source = "def solution(x):\r\n\treturn x\r\n\x0c\n"
    assert read("b.zip", make_zip({"all-reduce.py": source})).solutions
