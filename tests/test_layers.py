"""The portal reaches the evaluator through one face (issue 47): `evaluator.face`, never a
judge's, host's or intake's module, so those can move without touching the portal."""

from __future__ import annotations

import ast
from pathlib import Path

import evaluator.face

REPO = Path(__file__).resolve().parents[1]
FACE = "evaluator.face"


def evaluator_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of the evaluator package in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] == "evaluator"]
    return found


def test_the_portal_imports_the_evaluator_through_its_face_alone():
    wrong = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "portal").rglob("*.py"))
        for line, module in evaluator_imports(path)
        if module != FACE
    ]
    assert not wrong, "import these through evaluator.face:\n" + "\n".join(wrong)


def test_the_check_sees_an_import_past_the_face(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import evaluator.judge.stats\nfrom evaluator.host import liveness\n")
    assert evaluator_imports(bad) == [(1, "evaluator.judge.stats"), (2, "evaluator.host")]


def test_everything_the_face_shows_is_there():
    shown = evaluator.face.__all__
    assert "EvaluationRequest" in shown and "liveness" in shown
    assert all(getattr(evaluator.face, name) is not None for name in shown)
    assert evaluator.face.liveness.__name__ == "evaluator.host.liveness"


def test_every_name_the_portal_takes_from_the_face_is_on_it():
    missing = [
        f"{path.relative_to(REPO)}: {alias.name}"
        for path in sorted((REPO / "portal").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == FACE
        for alias in node.names
        if not hasattr(evaluator.face, alias.name)
    ]
    assert not missing, missing
