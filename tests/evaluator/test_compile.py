"""The compile pass: each solution file imported once, in a process of its own, before the ranks.

One bundle, evaluated once on 2 gloo ranks: two files that import and pass, one whose
import raises, one whose import hangs. Every import appends a record of the process it ran
in to a file in its working directory; the scratch directory is kept to read them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evaluator.contract import ProblemStatus
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator import samples
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import noted_pid_running, reachable_folder

# The compile pass's time: a sandboxed torch import on a loaded 2-core machine took over 6 s.
TIMEOUT_S = 15
WORLD_SIZE = 2
SLUGS = ["ar-imports-a", "ar-imports-b", "ar-imports-fail", "ar-imports-hang"]


@pytest.fixture(scope="module")
def evaluated():
    with reachable_folder("compile") as scratch_dir, reachable_folder("compile-notes") as notes:
        # Root's, writable by all: a folder the candidate user owned would be cleared as
        # litter when the evaluation starts (host/cleanup.py).
        notes.chmod(0o1777)
        results, environment, scratch = _evaluate(scratch_dir, notes)
        yield results, environment, scratch, notes


def _evaluate(scratch_dir: Path, notes: Path):
    sources = {
        "ar-imports-a.py": samples.IMPORTS_AND_REDUCES,
        "ar-imports-b.py": samples.IMPORTS_AND_REDUCES,
        "ar-imports-fail.py": samples.IMPORT_RAISES,
        "ar-imports-hang.py": samples.IMPORT_HANGS,
    }
    files = {name: source.replace("@NOTES@", str(notes)) for name, source in sources.items()}
    bundle = read_bundle("b.zip", make_zip(files), known_slugs=samples.CATALOG)
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"}),
        trials=1,
        warmup=0,
        iters=2,
        problem_timeout_s=TIMEOUT_S,
        scratch_dir=scratch_dir,
        keep_scratch=True,
        sandbox_shared=(notes,),
    )
    results, environment = evaluate_bundle(
        bundle,
        slugs=SLUGS,
        profile=dataclasses.replace(get_profile("cpu"), world_size=WORLD_SIZE),
        settings=settings,
        evaluation_id="test-compile",
        problems=samples.CATALOG,
    )
    [scratch] = scratch_dir.glob("pkb-eval-*")
    return {r.slug: r for r in results}, environment, scratch


def records(notes: Path, slug: str) -> list[dict]:
    path = notes / f"imported-pkb_solution_{slug.replace('-', '_')}"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_files_that_import_are_imported_once_more_by_each_rank(evaluated):
    results, _, scratch, notes = evaluated
    for slug in ("ar-imports-a", "ar-imports-b"):
        assert results[slug].status == ProblemStatus.PASSED, results[slug].message
        seen = records(notes, slug)
        assert [r["ranked"] for r in seen] == [False] + [True] * WORLD_SIZE


def test_each_file_is_imported_in_a_process_of_its_own(evaluated):
    _, _, scratch, notes = evaluated
    a, b = records(notes, "ar-imports-a"), records(notes, "ar-imports-b")
    assert a[0]["pid"] != b[0]["pid"]
    ranks = {r["pid"] for r in a[1:]}
    assert len(ranks) == WORLD_SIZE and not ranks & {a[0]["pid"], b[0]["pid"]}


def test_imports_and_ranks_share_the_evaluations_own_extension_cache(evaluated):
    _, _, scratch, notes = evaluated
    seen = records(notes, "ar-imports-a") + records(notes, "ar-imports-b")
    assert {r["cache"] for r in seen} == {str(scratch / "extensions")}
    assert {r["cwd"] for r in seen} == {str(scratch / "bundle")}


def test_an_import_that_raises_is_a_compile_error_and_never_reaches_the_ranks(evaluated):
    results, _, scratch, notes = evaluated
    result = results["ar-imports-fail"]
    assert result.status == ProblemStatus.COMPILE_ERROR
    assert result.message == (
        "ar-imports-fail.py failed to import: RuntimeError: refusing to import"
    )
    assert "Traceback" in result.log and result.cases == []
    assert [r["ranked"] for r in records(notes, "ar-imports-fail")] == [False]


def test_an_import_that_hangs_is_a_compile_error_and_is_killed(evaluated):
    results, _, scratch, notes = evaluated
    result = results["ar-imports-hang"]
    assert result.status == ProblemStatus.COMPILE_ERROR
    assert result.message == f"ar-imports-hang.py failed to import: took longer than {TIMEOUT_S} s"
    [record] = records(notes, "ar-imports-hang")
    assert not noted_pid_running(record["pid"])


def test_the_compile_pass_time_is_in_the_environment(evaluated):
    _, environment, _, _ = evaluated
    assert environment["compile_s"] > 0
