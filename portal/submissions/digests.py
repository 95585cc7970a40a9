"""What code a submission runs for each problem, as a digest: "the same code" for scoring.

The boards pool a team's runs of the same code on a problem (portal/leaderboard/scoring.py
says why), so "the same code" must not depend on how the bundle was packed or commented.
A problem's digest covers what its solution can import: its own `<slug>.py` and every file
of the bundle that is not another problem's solution (helper modules, .cu/.cpp sources,
notes). Python files count by their syntax tree (`ast.dump`), so a comment, a blank line or
a reformatting is the same code; every other file counts by its bytes.
"""

from __future__ import annotations

import ast
import hashlib
from typing import TYPE_CHECKING

from evaluator.face import Bundle, BundleError, read_bundle

if TYPE_CHECKING:
    from portal.submissions.models import Submission


def _normalised(path: str, data: bytes) -> bytes:
    if not path.endswith(".py"):
        return data
    try:
        tree = ast.parse(data.decode("utf-8"), filename=path)
    except (SyntaxError, ValueError):  # read_bundle refuses these; a digest still exists
        return data
    return ast.dump(tree, annotate_fields=True, include_attributes=False).encode()


def code_digest(bundle: Bundle, slug: str) -> str:
    """The hex SHA-256 of the code problem `slug` runs in `bundle`."""
    others = {path for other, path in bundle.solutions.items() if other != slug}
    digest = hashlib.sha256()
    for path in sorted(bundle.files):
        if path in others:
            continue
        content = _normalised(path, bundle.files[path])
        # Lengths first: no two different sets of files hash the same stream.
        digest.update(f"{len(path)}:{path}:{len(content)}:".encode())
        digest.update(content)
    return digest.hexdigest()


def code_digests(bundle: Bundle) -> dict[str, str]:
    """{slug: digest} for every problem the bundle solves."""
    return {slug: code_digest(bundle, slug) for slug in sorted(bundle.solutions)}


def unique_digest(submission_id: int, slug: str) -> str:
    """A digest that no other code has: for a bundle that can no longer be read, so that its
    results pool with nothing (they count as they are)."""
    text = f"unreadable bundle of submission {submission_id}: {slug}"
    return hashlib.sha256(text.encode()).hexdigest()


def stored_code_digests(submission: Submission) -> dict[str, str]:
    """{slug: digest} of a stored submission, read from its bundle file; a problem whose
    code cannot be read (a missing or unreadable file) gets `unique_digest`. Takes the
    historical model in a migration as well as the model."""
    slugs = list(submission.problems or [])
    try:
        with submission.bundle.open("rb") as fh:
            data = fh.read()
        bundle = read_bundle(submission.bundle_name, data, known_slugs=slugs)
    except (OSError, ValueError, BundleError):
        return {slug: unique_digest(submission.pk, slug) for slug in slugs}
    digests = code_digests(bundle)
    return {slug: digests.get(slug) or unique_digest(submission.pk, slug) for slug in slugs}
