"""Problem versions are part of every result: a version that moves sends every result on
that problem back to re-judging. This pins them, so that a move is a decision made in the
same commit (update versions.json with it), never a side effect of a refactor."""

from __future__ import annotations

import json
from pathlib import Path

from problems import all_problems

PINNED = json.loads((Path(__file__).with_name("versions.json")).read_text())


def test_pinned_problem_versions_do_not_move():
    current = {p.slug: p.version for p in all_problems()}
    moved = {slug: (v, current.get(slug)) for slug, v in PINNED.items() if current.get(slug) != v}
    assert not moved, f"versions moved (pinned, now): {moved}; see this module's docstring"


def test_every_problem_is_pinned():
    unpinned = sorted({p.slug for p in all_problems()} - set(PINNED))
    assert not unpinned, f"add to tests/problems/versions.json: {unpinned}"
