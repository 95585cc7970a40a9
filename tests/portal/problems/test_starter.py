"""The starter `<slug>.py` of every problem: self-contained, and judged as the reference."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from portal.problems.starter import helper_modules, starter_source
from problems import all_problems, get_problem

REPO = Path(__file__).resolve().parents[3]


def _starter(slug: str) -> str:
    spec = get_problem(slug)
    root = inspect.getmodule(spec.reference).__name__
    return starter_source(root=root, slug=slug, title=spec.title, signature=spec.signature)


def test_every_starter_uses_only_names_it_defines(tmp_path):
    for spec in all_problems():
        (tmp_path / f"{spec.slug}.py").write_text(_starter(spec.slug))
    # Undefined names, redefinitions (two helpers' functions of one name) and names used
    # before assignment: what would break a starter when it runs.
    checked = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--isolated", "--no-cache"]
        + ["--select", "F821,F811,F823", "--output-format", "concise", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("slug", [p.slug for p in all_problems()])
def test_every_starter_defines_the_references_signature_without_the_catalog(slug):
    text = _starter(slug)
    assert "from problems" not in text and "import problems" not in text
    namespace: dict = {"__name__": f"starter_{slug.replace('-', '_')}"}
    exec(compile(text, f"{slug}.py", "exec"), namespace)
    assert f"solution{inspect.signature(namespace['solution'])}".replace("'", "") == (
        get_problem(slug).signature
    )


def test_helper_modules_are_found_through_aliases_and_package_imports():
    assert helper_modules("problems.expert.dispatch_topk") == ["problems.expert._routing_a"]
    assert helper_modules("problems.context.zigzag_ring_attention") == ["problems.context._ring"]
    assert "problems.pipeline._stage" in helper_modules("problems.pipeline.stage_send_recv")
    assert helper_modules("problems.collective.all_reduce") == []


@pytest.mark.integration
def test_starters_that_copy_helpers_in_pass_the_evaluator(tmp_path):
    """Two starters whose references import helpers, one by name and one through a module
    alias (`_ring as ring`), judged by the real evaluator on gloo ranks."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for slug in ("ep-moe-forward", "cp-zigzag-ring-attention"):
        (bundle / f"{slug}.py").write_text(_starter(slug))
    done = subprocess.run(
        [sys.executable, "-m", "evaluator", "check", str(bundle), "--world-size", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" passed ") == 2, done.stdout
