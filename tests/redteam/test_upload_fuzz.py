"""The upload fuzzer: 1,054 malformed uploads of 31 kinds, each refused with a BundleError
(never another exception), the message saying what is wrong where the damage decides it.

Seeded: PKB_FUZZ_SEED picks another run, and a failure names its seed. The same kinds go
through the Submit page and the API in tests/portal/submissions/test_upload_fuzz.py.
"""

from __future__ import annotations

import os
import re
import zipfile

import pytest

from evaluator.intake.bundle import BundleError, read_bundle
from evaluator.intake.sources import MAX_PYTHON_TOKENS
from tests.evaluator.archives import make_zip
from tests.evaluator.malformed import FUZZ_OPEN_SLUG, MALFORMED_KINDS, malformed_uploads

SEED = int(os.environ.get("PKB_FUZZ_SEED", "20261123"))
COUNT = 34 * len(MALFORMED_KINDS)
KNOWN = (FUZZ_OPEN_SLUG, "all-gather")


def _outcome(filename: str, data: bytes) -> str:
    try:
        read_bundle(filename, data, known_slugs=KNOWN)
    except BundleError as exc:
        return str(exc)
    return "accepted"


def test_a_thousand_malformed_uploads_are_each_refused_with_a_clear_message():
    uploads = malformed_uploads(seed=SEED, count=COUNT)
    assert len(uploads) >= 1000
    wrong = []
    for upload in uploads:
        try:
            message = _outcome(upload.filename, upload.data)
        except Exception as exc:  # the defect this test exists for: anything but BundleError
            wrong.append((upload.kind, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        if message == "accepted" or (upload.expect and not re.search(upload.expect, message)):
            wrong.append((upload.kind, message[:200]))
    assert wrong == [], f"seed {SEED}"


@pytest.mark.parametrize(
    "body",
    [
        "y = " + "-" * 200_000 + "1",  # MemoryError in CPython's parser, measured
        "y = a" + ".b" * 5_000,  # RecursionError while building the AST
        "y = " + "(-lambda a, b: " * 200 + "1" + ")" * 200,  # commas do not reset a lambda
        "if x:\n    pass\n" + "elif x:\n    pass\n" * 3_000,
        "y = f'{" + "not " * 3_000 + "x}'",
    ],
    ids=["unary", "attributes", "lambdas", "elif-chain", "f-string"],
)
def test_a_source_nested_too_deep_for_the_parser_is_refused_before_parsing(body):
    source = "def solution(x):\n    return x\n" + body + "\n"
    data = make_zip({f"{FUZZ_OPEN_SLUG}.py": source}, compression=zipfile.ZIP_STORED)
    assert re.search(
        r"all-reduce\.py line \d+: .*(nested more than|elif branches)", _outcome("b.zip", data)
    )


def test_real_nesting_is_accepted():
    # 200 brackets (the tokenizer's own limit), a 300-term sum, a 100-branch elif chain.
    body = (
        "y = " + "(" * 199 + "1" + ")" * 199 + "\n"
        "z = " + " + ".join(["x"] * 300) + "\n"
        "if x:\n    pass\n" + "elif x:\n    pass\n" * 100
    )
    data = make_zip({f"{FUZZ_OPEN_SLUG}.py": "def solution(x):\n    return x\n" + body})
    assert _outcome("b.zip", data) == "accepted"


def test_the_python_of_a_bundle_is_capped_in_tokens():
    # Two helpers under the per-file byte cap whose tokens together pass the budget:
    # ast.parse would need hundreds of MiB for them.
    half = "a\n" * (MAX_PYTHON_TOKENS // 4 + 1)
    files = {f"{FUZZ_OPEN_SLUG}.py": "def solution(x):\n    return x\n", "_a.py": half}
    files["_b.py"] = half
    message = _outcome("b.zip", make_zip(files, compression=zipfile.ZIP_STORED))
    assert re.match(rf"_b\.py line \d+: .* more than {MAX_PYTHON_TOKENS} tokens", message)
