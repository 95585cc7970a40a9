"""What the submission page shows, and to whom: logs only to the team and admins."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluator.host import liveness
from portal.submissions.models import Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

LOG = "Traceback (most recent call last):\n  SECRET-FRAME"


@pytest.fixture
def failed(team, problems):
    submission = SubmissionFactory(
        team=team, done=True, problems=["all-reduce"], environment={"torch": "2.13.0", "cpu": "x86"}
    )
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        status="runtime_error",
        message="RuntimeError on rank 2",
        log=LOG,
        speedup=None,
    )
    return submission


def pages(client, submission) -> list[str]:
    urls = [
        reverse("submissions:detail", args=[submission.pk]),
        reverse("submissions:status", args=[submission.pk]),
    ]
    return [client.get(url) for url in urls]


@pytest.mark.parametrize("who", ["alice", "bob", "admin"])
def test_the_team_and_admins_see_logs_errors_and_the_environment(client, request, failed, who):
    client.force_login(request.getfixturevalue(who))
    for response in pages(client, failed):
        html = response.content.decode()
        assert response.status_code == 200
        assert "SECRET-FRAME" in html and "RuntimeError on rank 2" in html
        assert "2.13.0" in html


def test_outsiders_never_see_logs(client, charlie, dana, failed):
    for outsider in (charlie, dana):
        client.force_login(outsider)
        for response in pages(client, failed):
            assert response.status_code == 404 and b"SECRET-FRAME" not in response.content
    client.logout()
    for response in pages(client, failed):
        assert response.status_code == 302 and b"SECRET-FRAME" not in response.content
    team_page = client.get(reverse("leaderboard:team", args=[failed.team.slug]))
    assert b"SECRET-FRAME" not in team_page.content


def test_a_running_submission_shows_its_progress(client, alice, team):
    running = SubmissionFactory(
        team=team,
        running=True,
        problems=["all-reduce", "all-gather", "tp-linear"],
        progress_done=1,
        progress_total=3,
        current_problem="all-gather",
    )
    client.force_login(alice)
    [detail, partial] = pages(client, running)
    for html in (detail.content.decode(), partial.content.decode()):
        assert "1 / 3 problems judged, now: <strong>all-gather</strong>" in html
        assert '<progress value="1" max="3">' in html
    assert 'hx-trigger="every 2s"' in partial.content.decode()


def test_the_team_sees_why_its_submission_was_disqualified(client, alice, failed):
    Submission.objects.filter(pk=failed.pk).update(
        disqualified_at=timezone.now(), disqualification_reason="timer patched"
    )
    client.force_login(alice)
    html = pages(client, failed)[0].content.decode()
    assert 'id="disqualified"' in html and "timer patched" in html


def test_the_page_links_to_the_teams_public_page(client, alice, failed):
    client.force_login(alice)
    html = pages(client, failed)[0].content.decode()
    assert f'href="/teams/{failed.team.slug}/?profile=cpu"' in html


def test_a_queued_submission_says_when_no_worker_of_its_profile_is_connected(
    client, alice, team, liveness_keys
):
    waiting = SubmissionFactory(team=team, user=alice)
    client.force_login(alice)
    for response in pages(client, waiting):
        html = response.content.decode()
        assert "waiting for a cpu worker (CPU, 4 ranks over gloo): none is connected now" in html
    # A worker announces itself on every heartbeat (evaluator.host.tasks.KeepMessagesVisible).
    liveness.announce_worker(liveness_keys, profile="cpu", name="pkb-cpu@host")
    for response in pages(client, waiting):
        html = response.content.decode()
        assert "none is connected" not in html
        assert "waiting for a CPU, 4 ranks over gloo host" in html


def test_a_reason_that_ends_in_a_period_is_not_given_a_second(client, alice, failed):
    Submission.objects.filter(pk=failed.pk).update(
        disqualified_at=timezone.now(), disqualification_reason="Timer patched."
    )
    client.force_login(alice)
    html = pages(client, failed)[0].content.decode()
    assert "Disqualified: Timer patched. Its results" in html and ".." not in html


def test_a_started_submission_says_starting_before_any_count(client, alice, team):
    eight = ["all-reduce", "all-gather", "reduce-scatter", "broadcast"] * 2
    started = SubmissionFactory(team=team, status=Submission.Status.RUNNING, problems=eight)
    Submission.objects.filter(pk=started.pk).update(host="cpu-host-1")
    client.force_login(alice)
    for response in pages(client, started):
        html = response.content.decode()
        assert "starting on cpu-host-1" in html
        assert "0 / 8" not in html and "problems judged" not in html
