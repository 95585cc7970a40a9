"""The portal reaches the evaluator through one face (issue 47): `evaluator.face`, never a
judge's, host's or intake's module, so those can move without touching the portal."""

from __future__ import annotations

import ast
from pathlib import Path

import evaluator.face

REPO = Path(__file__).resolve().parents[1]
FACE = "evaluator.face"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in a file, at any depth inside it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def evaluator_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of the evaluator package in a file."""
    return [(line, name) for line, name in imports(path) if name.split(".")[0] == "evaluator"]


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


# The portal's apps, lowest first: an app imports only those before it (issue 47). The
# shared modules beside them (portal/formats.py, celery.py, settings) are below them all.
APP_ORDER = ("accounts", "problems", "submissions", "leaderboard", "entries", "ops", "api", "cli")
# The imports that still go up the order, by file: debt, each to be moved (a board's entry
# rows into a source that entries registers, the problem pages' rankings into leaderboard's
# views, the queue's template tags into ops...). The check fails on any other, and on one
# of these that is gone (take it off the list).
UPWARD = {
    ("portal/accounts/admin.py", "submissions"),
    ("portal/accounts/views.py", "submissions"),
    ("portal/entries/api.py", "api"),
    ("portal/leaderboard/selectors/board.py", "entries"),
    ("portal/problems/admin.py", "leaderboard"),
    ("portal/problems/admin.py", "submissions"),
    ("portal/problems/selectors.py", "leaderboard"),
    ("portal/problems/timings.py", "submissions"),
    ("portal/problems/views.py", "leaderboard"),
    ("portal/submissions/admin.py", "ops"),
    ("portal/submissions/templatetags/queue.py", "ops"),
    ("portal/submissions/templatetags/results.py", "leaderboard"),
}


def portal_imports(path: Path) -> set[str]:
    """The portal apps a file imports."""
    return {name.split(".")[1] for _, name in imports(path) if name.startswith("portal.")}


def test_the_portals_apps_import_down_their_order_alone():
    rank = {app: i for i, app in enumerate(APP_ORDER)}
    assert {p.name for p in (REPO / "portal").iterdir() if (p / "apps.py").exists()} <= set(rank)
    upward = {
        (str(path.relative_to(REPO)), other)
        for path in sorted((REPO / "portal").rglob("*.py"))
        if path.relative_to(REPO).parts[1] in rank
        for other in portal_imports(path)
        if rank.get(other, -1) > rank[path.relative_to(REPO).parts[1]]
    }
    assert upward - UPWARD == set(), "imports up the apps' order (docs/architecture.md)"
    assert UPWARD - upward == set(), "gone from the code: take them off UPWARD"
