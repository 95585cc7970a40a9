"""A benchmark run through real Celery workers on the real Redis: the host judges it in
full, the portal records it, and it reaches no board (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from portal.accounts.services import team_create
from portal.leaderboard.selectors import leaderboard_rows, team_standing
from portal.problems.services import problems_sync
from portal.submissions.models import Submission
from tests.integration.test_end_to_end import _wait_until_finished

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ALL_REDUCE = Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "all-reduce.py"


def _judged(client, workers, mode: str):
    """The team and its submission of the example's all-reduce in `mode`, uploaded through
    the site and judged by the workers."""
    problems_sync()
    alice = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team = team_create(owner=alice, name="Alice's Kernels")
    client.force_login(alice)
    upload = SimpleUploadedFile("all-reduce.py", ALL_REDUCE.read_bytes())
    response = client.post(
        reverse("submissions:submit"), {"bundle": upload, "mode": mode, "profile": "cpu"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    submission = _wait_until_finished(Submission.objects.get().pk, workers)
    assert (submission.status, submission.mode) == (Submission.Status.DONE, mode)
    return team, submission


def test_a_benchmark_run_is_judged_in_full_and_ranks_nowhere(client, workers):
    team, submission = _judged(client, workers, "benchmark")
    [result] = submission.results.all()
    assert result.status == "passed" and result.speedup and result.time_us

    assert [r.team_name for r in leaderboard_rows(profile="cpu") if r.is_ranked] == []
    assert team_standing(team=team, profile="cpu").best == []
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert "mode-benchmark" in page and "never ranked" in page


def test_a_profile_run_leaves_a_trace_the_team_can_open(client, workers):
    _, submission = _judged(client, workers, "profile")
    names = set(submission.artifacts.values_list("name", flat=True))
    assert {"all-reduce.rank0.trace.json", "all-reduce.summary.md"} <= names, names
    trace = client.get(
        reverse("submissions:artifact", args=[submission.pk, "all-reduce.rank0.trace.json"])
    )
    assert trace.status_code == 200 and "attachment" in trace["Content-Disposition"]
    events = json.loads(b"".join(trace.streaming_content))["traceEvents"]  # Chrome trace JSON
    assert any(e.get("name") == "pkb.solution" for e in events)
    assert [r.team_name for r in leaderboard_rows(profile="cpu") if r.is_ranked] == []
