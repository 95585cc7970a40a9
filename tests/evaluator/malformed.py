"""Malformed uploads for the upload fuzzer (tests/redteam/test_upload_fuzz.py and
tests/portal/submissions/test_upload_fuzz.py), built on the archive builders of archives.py.

Each kind builds one flavour of bad upload from a seeded random.Random, so a run is
reproduced from its seed. Every archive that could survive its own damage (a flipped byte
that lands in padding) also solves FUZZ_CLOSED_SLUG, a problem the tests keep unpublished
or unknown: the upload is refused whatever the damage did, and nothing may be stored.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import tarfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from tests.evaluator.archives import Files, make_tar_gz, make_zip, tar_member

FUZZ_OPEN_SLUG = "all-reduce"
FUZZ_CLOSED_SLUG = "secret-op"
_GOOD = "import torch\n\n\ndef solution(x):\n    return x\n"
_REFUSED_ANYWAY = "unknown problem|Not open for submissions"


@dataclass(frozen=True)
class Malformed:
    kind: str
    filename: str
    data: bytes
    # A regular expression the refusal matches, when the damage decides the refusal.
    expect: str | None = None


def _base_files(rng: random.Random) -> dict[str, bytes | str]:
    words = rng.choices(["x", "y", "torch", "rank", "+", "=", "\n", " ", "1", "(", ")"], k=400)
    return {
        FUZZ_OPEN_SLUG + ".py": _GOOD,
        FUZZ_CLOSED_SLUG + ".py": _GOOD,
        "_helper.py": "X = 1\n",
        "notes.md": "".join(words),
    }


def _zip_entries(data: bytes) -> list[int]:
    """Offsets of the central directory's entries."""
    end = data.rfind(b"PK\x05\x06")
    count, _, start = struct.unpack_from("<HII", data, end + 10)
    offsets, at = [], start
    for _ in range(count):
        offsets.append(at)
        name, extra, comment = struct.unpack_from("<HHH", data, at + 28)
        at += 46 + name + extra + comment
    return offsets


def _patch(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _flip(data: bytes, rng: random.Random, start: int, end: int, count: int) -> bytes:
    out = bytearray(data)
    for _ in range(count):
        at = rng.randrange(start, max(start + 1, end))
        out[at] ^= rng.randrange(1, 256)
    return bytes(out)


def _stored_zip(files: Files) -> bytes:
    # Stored, not deflated: a long source of one repeated character would otherwise be
    # refused as an archive bomb before its parse is ever tried.
    return make_zip(files, compression=zipfile.ZIP_STORED)


def _rename_in_zip(data: bytes, old: bytes, new: bytes, *, utf8_flag: bool = False) -> bytes:
    """Rewrite a member's name (same length) in its local and central headers; zipfile
    itself would never write a name cut at a NUL or flagged UTF-8 without being so."""
    out = bytearray(data)
    # (signature, offset of the flags, of the name's length, of the name)
    for sig, flags_at, len_at, name_at in ((b"PK\x03\x04", 6, 26, 30), (b"PK\x01\x02", 8, 28, 46)):
        at = 0
        while (at := out.find(sig, at)) >= 0:
            length = struct.unpack_from("<H", out, at + len_at)[0]
            if out[at + name_at : at + name_at + length] == old:
                out[at + name_at : at + name_at + length] = new
                if utf8_flag:
                    flags = struct.unpack_from("<H", out, at + flags_at)[0]
                    struct.pack_into("<H", out, at + flags_at, flags | 0x800)
            at += 4
    return bytes(out)


def _bad_utf8_name(rng):
    data = make_zip(_base_files(rng) | {"_QQ.py": "Y = 2\n"})
    bad = rng.choice([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0", b"\x80\x80", b"\xf8\x88"])
    return (
        "b.zip",
        _rename_in_zip(data, b"_QQ.py", b"_" + bad + b".py", utf8_flag=True),
        ("not valid UTF-8"),
    )


def _corrupt_stream(method: int):
    def build(rng):
        files = _base_files(rng)
        files["_big.py"] = "".join(
            f"V{i} = {rng.random()!r}\n" for i in range(rng.randrange(200, 800))
        )
        data = make_zip(files, compression=method)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.getinfo("_big.py")
        name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
        start = info.header_offset + 30 + name_len + extra_len
        # A run of bytes early in the stream: damage a decoder cannot skip over.
        at = rng.randrange(start, start + min(64, info.compress_size // 2))
        out = bytearray(data)
        for i in range(8):
            out[at + i] ^= 0xA5
        return "b.zip", bytes(out), "corrupt .zip"

    return build


def _deep_source(rng):
    n = rng.randrange(600, 6000)
    body = rng.choice(
        [
            "y = " + "-" * n + "1",
            "y = " + "not " * n + "1",
            "y = a" + ".b" * n,
            "y = a" + "()" * n,
            "y = 1" + "+1" * n,
            "y = 2" + "**2" * n,
            "y = a" + "[0]" * n,
            "y = " + "lambda: " * n + "1",
            "y = " + "1 if 1 else " * n + "1",
            "y = f'{" + "-" * n + "1}'",
            "y = " + "(-lambda a, b: " * 300 + "1" + ")" * 300,
            "if x:\n    pass\n" + "elif x:\n    pass\n" * n,
        ]
    )
    files = _base_files(rng) | {FUZZ_OPEN_SLUG + ".py": _GOOD + body + "\n"}
    # Python 3.12's tokenizer (the GPU hosts') stops at 200 open brackets itself, with
    # its own message; 3.11's leaves the bound to evaluator/intake/sources.py.
    return "b.zip", _stored_zip(files), "nested more than|elif branches|too many nested paren"


def _long_unary(rng):
    n = rng.randrange(3000, 300_000)
    op = rng.choice(["-", "~", "+", "not "])
    files = _base_files(rng) | {FUZZ_OPEN_SLUG + ".py": _GOOD + "y = " + op * n + "1\n"}
    return "b.zip", _stored_zip(files), "nested more than|larger than"


def _bad_header_offset(rng):
    data = make_zip(_base_files(rng))
    entry = rng.choice(_zip_entries(data))
    value = rng.choice([0xFFFFFFF0, 0x7FFFFFFF, len(data) + 10, rng.randrange(1, len(data))])
    return "b.zip", _patch(data, entry + 42, "<I", value), f"corrupt .zip|{_REFUSED_ANYWAY}"


def _bad_directory(rng):
    data = make_zip(_base_files(rng))
    end = data.rfind(b"PK\x05\x06")
    field, fmt = rng.choice([(16, "<I"), (12, "<I"), (10, "<H"), (8, "<H")])
    value = rng.choice([0, 0xFFFF, 0xFFFFFF00, len(data) * 3]) & (0xFFFF if fmt == "<H" else ~0)
    expect = f"corrupt .zip|holds no|{_REFUSED_ANYWAY}"
    return "b.zip", _patch(data, end + field, fmt, value), expect


def _truncated(rng):
    if rng.random() < 0.5:
        data = make_zip(_base_files(rng))
        name = "b.zip"
    else:
        data = make_tar_gz(_base_files(rng))
        name = "b.tar.gz"
    return name, data[: rng.randrange(4, len(data) - 1)], "corrupt|truncated|no readable tar"


def _bit_flips(rng):
    maker = rng.choice([make_zip, make_tar_gz])
    data = maker(_base_files(rng))
    return "b.bin", _flip(data, rng, 4, len(data), rng.randrange(1, 20)), None


def _bomb(rng):
    size = rng.randrange(64 * 1024, 1024 * 1024)
    files = _base_files(rng) | {"zeros.txt": bytes(size)}
    if rng.random() < 0.5:
        return "b.zip", make_zip(files), "archive bomb"
    return "b.tar.gz", make_tar_gz(files), "archive bomb"


def _duplicates(rng):
    files = _base_files(rng)
    if rng.random() < 0.5:
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns about the duplicate it writes
            with zipfile.ZipFile(buf, "w") as archive:
                for name, content in files.items():
                    archive.writestr(name, content)
                archive.writestr(FUZZ_OPEN_SLUG + ".py", "evil = 1\n")
        return "b.zip", buf.getvalue(), "appears twice"
    return "b.tgz", make_tar_gz(files | {"./" + FUZZ_OPEN_SLUG + ".py": _GOOD}), "appears twice"


_ESCAPES = ["../evil.py", "a/../../evil.py", "/etc/evil.py", "C:/evil.py", "a\\b.py", "//x.py"]


def _path_escape(rng):
    files = _base_files(rng) | {rng.choice(_ESCAPES): "x = 1\n"}
    maker, name = rng.choice([(make_zip, "b.zip"), (make_tar_gz, "b.tgz")])
    return name, maker(files), r"'\.\.'|absolute|backslash"


def _zip_with_info(files: Files, info: zipfile.ZipInfo, content: bytes) -> bytes:
    buf = io.BytesIO(make_zip(files))
    with zipfile.ZipFile(buf, "a") as archive:
        archive.writestr(info, content)
    return buf.getvalue()


def _link(rng):
    files = _base_files(rng)
    choice = rng.randrange(3)
    if choice == 0:
        info = zipfile.ZipInfo("_link.py")
        info.external_attr = 0o120777 << 16
        return "b.zip", _zip_with_info(files, info, b"/etc/passwd"), "symbolic links"
    kind = tarfile.SYMTYPE if choice == 1 else tarfile.LNKTYPE
    member = tar_member("_link.py", kind, linkname=rng.choice(["/etc/passwd", "../x", "a"]))
    return "b.tgz", make_tar_gz(files, extra=[member]), "links are not allowed"


def _special(rng):
    files = _base_files(rng)
    if rng.random() < 0.3:
        info = zipfile.ZipInfo("_dev.py")
        info.external_attr = rng.choice([0o020666, 0o060666, 0o010644, 0o140755]) << 16
        return "b.zip", _zip_with_info(files, info, b""), "only regular files"
    kind = rng.choice([tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
    return "b.tgz", make_tar_gz(files, extra=[tar_member("dev", kind)]), "only regular files"


def _many_members(rng):
    files = _base_files(rng) | {f"_m{i}.py": "" for i in range(rng.randrange(64, 600))}
    maker, name = rng.choice([(make_zip, "b.zip"), (make_tar_gz, "b.tgz")])
    return name, maker(files), "more than 64 members"


def _not_an_archive(rng):
    data = rng.choice(
        [
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096))),
            b"\x7fELF\x02\x01\x01" + bytes(64),
            b"\x89PNG\r\n\x1a\n" + bytes(32),
            b"Rar!\x1a\x07\x00" + bytes(16),
            b"def solution(x):\n    return x\n",
            b"BZh91AY&SY" + bytes(40),
        ]
    )
    if data[:2] in (b"PK", b"\x1f\x8b"):
        data = b"#" + data
    name = rng.choice(["b.zip", "b.tar.gz", "b.tgz", "b.exe", "bundle", "b.tar", "b.ZIP"])
    return name, data, "not a .zip or .tar.gz archive"


def _empty(rng):
    choice = rng.randrange(4)
    if choice == 0:
        return rng.choice(["b.zip", "b.tgz", "x.py"]), b"", "is empty"
    if choice == 1:
        return "b.zip", make_zip({}), "holds no"
    if choice == 2:
        return "b.tgz", make_tar_gz({}), "holds no"
    junk = {"__MACOSX/._x.py": b"\x00", ".DS_Store": b"\x00", "docs/": b""}
    return "b.zip", make_zip(junk), "holds no"


def _wrong_extension(rng):
    name = rng.choice(
        # Named to sort before the problem files, whose own checks would speak first.
        ["_lib.so", "_run.sh", "_x.exe", "_in.zip", "_m.pyc", "Makefile", "_x.py.bak", "_a.ipynb"]
    )
    content = make_zip({"x.py": "1"}) if name.endswith(".zip") else b"\x00\x01binary"
    files = _base_files(rng) | {name: content}
    maker, archive_name = rng.choice([(make_zip, "b.zip"), (make_tar_gz, "b.tgz")])
    return archive_name, maker(files), "file type not allowed"


def _nul_bytes(rng):
    files = _base_files(rng)
    if rng.random() < 0.5:
        source = _GOOD + "y = 1\n" * rng.randrange(0, 50)
        at = rng.randrange(len(source))
        files[FUZZ_OPEN_SLUG + ".py"] = source[:at] + "\x00" + source[at:]
        return "b.zip", make_zip(files), "NUL byte"
    data = make_zip(files | {"_aQb.py": "x = 1\n"})
    return "b.zip", _rename_in_zip(data, b"_aQb.py", b"_a\x00b.py"), "NUL"


def _not_utf8_source(rng):
    source = rng.choice(
        [
            _GOOD.encode("utf-16"),
            ("# café\n" + _GOOD).encode("latin-1"),
            _GOOD.encode() + b"s = '\xed\xa0\x80'\n",
            _GOOD.encode() + b"s = '\xc0\xaf'\n",
            bytes(rng.randrange(128, 256) for _ in range(64)),
        ]
    )
    files = _base_files(rng) | {FUZZ_OPEN_SLUG + ".py": source}
    return "b.zip", make_zip(files), "not valid UTF-8"


def _syntax(rng):
    source = rng.choice(
        [
            "def solution(:\n",
            _GOOD[: rng.randrange(1, len(_GOOD) - 2)] + "(",
            "def solution(x):\n  return x\n   y = 1\n",
            "".join(" " * i + "if x:\n" for i in range(110)) + " " * 110 + "pass\n",
            "x = (" * 210 + "1" + ")" * 210 + "\n",
            ")))\n",
            "def solution(x):\n\treturn x\n        pass\n",
            "x = '''unterminated\n",
        ]
    )
    files = _base_files(rng) | {FUZZ_OPEN_SLUG + ".py": source}
    return "b.zip", make_zip(files), r"line \d+|nested more than"


def _bad_names(rng):
    name, expect = rng.choice(
        [
            ("_аll.py", "not an allowed name"),
            (".hidden.py", "not an allowed name"),
            ("a b.py", "not an allowed name"),
            ("x" * 300 + ".py", "longer than"),
            ("/".join("d" * 9) + "/x.py", "deeper than"),
            ("_Helper.py", "differ only in case"),
            ("_helper.py/_x.py", "both a file and a folder"),
        ]
    )
    files = _base_files(rng) | {name: "x = 1\n"}
    return "b.zip", make_zip(files), expect


def _tar_name_not_utf8(rng):
    # tarfile reads such a name with surrogate escapes: a message quoting it must still be
    # text that a web page or a JSON body can carry.
    name = rng.choice(["\xff\xfe.py", "_caf\xe9.py", "\x80/x.py", "_\xc3(.py"])
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT, encoding="latin-1"
    ) as archive:
        for member, content in (_base_files(rng) | {name: "x = 1\n"}).items():
            data = content if isinstance(content, bytes) else content.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return "b.tgz", buf.getvalue(), "not an allowed name"


def _encrypted(rng):
    data = make_zip(_base_files(rng))
    entry = rng.choice(_zip_entries(data))
    flags = struct.unpack_from("<H", data, entry + 8)[0]
    return "b.zip", _patch(data, entry + 8, "<H", flags | 0x1), "encrypted"


def _unknown_method(rng):
    data = make_zip(_base_files(rng))
    entry = rng.choice(_zip_entries(data))
    method = rng.choice([1, 6, 9, 97, 98, 99, 0xFFFF])
    return "b.zip", _patch(data, entry + 10, "<H", method), f"corrupt .zip|{_REFUSED_ANYWAY}"


def _gzip_garbage(rng):
    payload = rng.choice(
        [
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2048))),
            b"not a tar at all\n" * 40,
            make_zip(_base_files(rng)),
        ]
    )
    data = gzip.compress(payload, mtime=0)
    if rng.random() < 0.5:
        data = _flip(data, rng, 10, len(data), rng.randrange(1, 6))
    if rng.random() < 0.3:
        data += bytes(rng.randrange(256) for _ in range(20))
    return "b.tar.gz", data, "no readable tar|corrupt|truncated|archive bomb"


def _local_header_mismatch(rng):
    data = bytearray(make_zip(_base_files(rng)))
    at = data.find(FUZZ_OPEN_SLUG.encode(), 30)  # the first local header's name
    data[at] ^= 0x20
    return "b.zip", bytes(data), "corrupt .zip"


def _garbage_extra(rng):
    data = make_zip(_base_files(rng))
    entry = rng.choice(_zip_entries(data))
    # An extra field claimed past the entry, or a ZIP64 record too short for its sizes.
    value = rng.choice([0xFFFF, 4, 12, 200])
    return "b.zip", _patch(data, entry + 30, "<H", value), None


def _no_solution(rng):
    files = _base_files(rng) | {FUZZ_OPEN_SLUG + ".py": rng.choice(["x = 1\n", "", "# hi\n"])}
    return "b.zip", make_zip(files), "defines no top-level solution"


def _bare_python(rng):
    choice = rng.randrange(6)
    if choice == 0:
        return "_helper.py", _GOOD.encode(), "must be named <problem-slug>.py"
    if choice == 1:
        return "solution.py", _GOOD.encode(), "unknown problem"
    if choice == 2:
        return f"{FUZZ_OPEN_SLUG}.py", (_GOOD + "\x00").encode(), "NUL byte"
    if choice == 3:
        return f"{FUZZ_OPEN_SLUG}.py", (_GOOD + "y = " + "-" * 5000 + "1\n").encode(), "nested"
    if choice == 4:
        return f"{FUZZ_OPEN_SLUG} (1).py", _GOOD.encode(), "not an allowed name"
    return f"{FUZZ_OPEN_SLUG}.py", b"x" * (1024 * 1024 + 1), "larger than"


MALFORMED_KINDS: dict[str, Callable[[random.Random], tuple[str, bytes, str | None]]] = {
    "utf8-flagged-bad-name": _bad_utf8_name,
    "corrupt-lzma": _corrupt_stream(zipfile.ZIP_LZMA),
    "corrupt-bzip2": _corrupt_stream(zipfile.ZIP_BZIP2),
    "corrupt-deflate": _corrupt_stream(zipfile.ZIP_DEFLATED),
    "deep-source": _deep_source,
    "long-unary-chain": _long_unary,
    "bad-header-offset": _bad_header_offset,
    "bad-central-directory": _bad_directory,
    "truncated": _truncated,
    "bit-flips": _bit_flips,
    "bomb": _bomb,
    "duplicate-names": _duplicates,
    "path-escape": _path_escape,
    "link-member": _link,
    "special-member": _special,
    "many-members": _many_members,
    "not-an-archive": _not_an_archive,
    "empty": _empty,
    "wrong-extension": _wrong_extension,
    "nul-bytes": _nul_bytes,
    "not-utf8-source": _not_utf8_source,
    "syntax-error": _syntax,
    "bad-names": _bad_names,
    "tar-name-not-utf8": _tar_name_not_utf8,
    "encrypted-flag": _encrypted,
    "unknown-compression": _unknown_method,
    "gzip-garbage": _gzip_garbage,
    "local-header-mismatch": _local_header_mismatch,
    "garbage-extra-field": _garbage_extra,
    "no-solution": _no_solution,
    "bare-python": _bare_python,
}


def malformed_uploads(*, seed: int, count: int) -> list[Malformed]:
    """`count` bad uploads, the kinds taken in turn so that every kind is in any run of
    len(MALFORMED_KINDS) or more."""
    rng = random.Random(seed)
    kinds = list(MALFORMED_KINDS)
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        filename, data, expect = MALFORMED_KINDS[kind](rng)
        out.append(Malformed(kind, filename, data, expect))
    return out
