"""Upload through the web form; real Celery workers on the real Redis judge it end to end."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from portal.accounts.services import team_create
from portal.leaderboard.selectors import leaderboard_rows
from portal.problems.services import problems_sync
from portal.submissions.models import Submission
from tests.evaluator.archives import make_zip

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
DEADLINE_S = 300


def _example_bundle(*, broken: str | None = None) -> bytes:
    files = {p.name: p.read_text() for p in sorted(EXAMPLE.glob("*.py"))}
    if broken:
        files[f"{broken}.py"] += (
            "\n\n_right = solution\n\ndef solution(*a, **k):\n    return _right(*a, **k) * 2\n"
        )
    return make_zip(files)


def _wait_until_finished(submission_id: int, logs: dict[str, Path]) -> Submission:
    # The workers are other processes: the database is the only thing to watch.
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        submission = Submission.objects.get(pk=submission_id)
        if submission.status in (Submission.Status.DONE, Submission.Status.FAILED):
            return submission
        time.sleep(0.5)
    worker_logs = "\n".join(f"--- {k}\n{v.read_text()[-3000:]}" for k, v in logs.items())
    pytest.fail(f"submission {submission_id} still {submission.status}\n{worker_logs}")


def _upload(client, user, bundle: bytes, name: str) -> int:
    client.force_login(user)
    upload = io.BytesIO(bundle)
    upload.name = name
    response = client.post(reverse("submissions:submit"), {"bundle": upload})
    assert response.status_code == 302, response.content.decode()[:2000]
    return Submission.objects.latest("created_at").pk


def test_an_uploaded_bundle_is_judged_and_ranked(client, workers):
    problems_sync()
    users = get_user_model().objects
    alice = users.create_user("alice", password="x-very-secret-1")
    charlie = users.create_user("charlie", password="x-very-secret-2")
    team_create(owner=alice, name="Alice's Kernels")
    team_create(owner=charlie, name="Charlie Ltd")

    good = _upload(client, alice, _example_bundle(), "pytorch.zip")
    bad = _upload(client, charlie, _example_bundle(broken="all-gather"), "broken.zip")

    submission = _wait_until_finished(good, workers)
    assert submission.status == Submission.Status.DONE, submission.reason
    results = {r.problem.slug: r for r in submission.results.select_related("problem")}
    assert len(results) == 8
    assert {r.status for r in results.values()} == {"passed"}, {
        slug: r.message for slug, r in results.items() if r.status != "passed"
    }
    assert all(r.time_us and r.ref_time_us and r.speedup for r in results.values())
    assert submission.environment["world_size"] == 4

    broken = _wait_until_finished(bad, workers)
    by_slug = {r.problem.slug: r for r in broken.results.select_related("problem")}
    assert by_slug["all-gather"].status == "wrong_answer"
    assert "rank" in by_slug["all-gather"].message
    assert by_slug["all-reduce"].status == "passed"

    page = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "Alice&#x27;s Kernels" in page or "Alice's Kernels" in page
    assert "Charlie Ltd" in page
    # Who ranks first depends on CPU timings (fast_1 comes first); what each solved does not.
    rows = {r.team_name: r for r in leaderboard_rows(profile="cpu") if not r.is_baseline}
    assert rows["Alice's Kernels"].score.solved == 8
    assert rows["Charlie Ltd"].score.solved == 7

    detail = client.get(reverse("submissions:detail", args=[bad])).content.decode()
    assert "wrong answer" in detail.lower() or "wrong_answer" in detail
