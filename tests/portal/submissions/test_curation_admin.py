"""Admin curation of submissions, through the admin's own views with a staff client."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from portal.submissions.models import ProblemResult, Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:submissions_submission_changelist")
QUEUE = reverse("admin:submissions_activesubmission_changelist")
LOG = reverse("admin:admin_logentry_changelist")


@pytest.fixture
def passed(team, alice, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, bundle_name="fast.zip")
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"])
    return submission


def _log(submission) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=str(submission.pk))
        .order_by("action_time", "id")
        .values_list("change_message", flat=True)
    )


def test_disqualifying_asks_for_a_reason_first(client, admin, passed):
    client.force_login(admin)
    response = client.post(CHANGELIST, {"action": "disqualify", "_selected_action": [passed.pk]})
    assert response.status_code == 200
    body = response.content.decode()
    assert "a reason the team will read" in body and "fast.zip" in body
    passed.refresh_from_db()
    assert not passed.is_disqualified and _log(passed) == []


def test_an_empty_reason_is_refused(client, admin, passed):
    client.force_login(admin)
    response = client.post(
        CHANGELIST,
        {"action": "disqualify", "_selected_action": [passed.pk], "apply": "1", "reason": " "},
    )
    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    passed.refresh_from_db()
    assert not passed.is_disqualified


def test_the_admin_disqualifies_and_reinstates_with_a_log(client, admin, passed, team):
    client.force_login(admin)
    response = client.post(
        CHANGELIST,
        {
            "action": "disqualify",
            "_selected_action": [passed.pk],
            "apply": "1",
            "reason": "Returned cached outputs for repeated inputs.",
        },
    )
    assert response.status_code == 302
    passed.refresh_from_db()
    assert passed.disqualification_reason == "Returned cached outputs for repeated inputs."
    assert not ProblemResult.objects.counted(profile="cpu").exists()
    assert _log(passed) == ["Disqualify submissions: Returned cached outputs for repeated inputs."]
    assert "Returned cached outputs" in client.get(LOG).content.decode()

    client.post(CHANGELIST, {"action": "reinstate", "_selected_action": [passed.pk]})
    passed.refresh_from_db()
    assert not passed.is_disqualified
    assert ProblemResult.objects.counted(profile="cpu").exists()
    assert "Reinstated (disqualification undone)." in _log(passed)


def test_the_changelist_filters_disqualified_submissions(client, admin, passed, team, alice):
    other = SubmissionFactory(team=team, user=alice, done=True, bundle_name="other.zip")
    Submission.objects.filter(pk=other.pk).update(
        disqualified_at=timezone.now(), disqualification_reason="x"
    )
    client.force_login(admin)
    body = client.get(CHANGELIST, {"disqualified": "yes"}).content.decode()
    assert "other.zip" in body and "fast.zip" not in body


def test_cancel_and_rerun_are_logged(
    client, admin, team, alice, sent, django_capture_on_commit_callbacks
):
    queued = SubmissionFactory(team=team, user=alice)
    client.force_login(admin)
    client.post(CHANGELIST, {"action": "cancel", "_selected_action": [queued.pk]})
    queued.refresh_from_db()
    assert queued.status == Submission.Status.CANCELLED
    with django_capture_on_commit_callbacks(execute=True):
        client.post(CHANGELIST, {"action": "requeue", "_selected_action": [queued.pk]})
    queued.refresh_from_db()
    assert queued.status == Submission.Status.QUEUED and queued.attempts == 2
    assert [r.submission_id for r, _ in sent] == [queued.pk]
    assert _log(queued) == ["Cancelled by admin.", "Started over by admin."]


def test_the_two_ways_of_judging_again_say_what_happens_to_the_results(client, admin, passed):
    client.force_login(admin)
    body = client.get(CHANGELIST).content.decode()
    assert "Start over: judge selected submissions from scratch (discards their results)" in body
    assert "Add a run for the ranking: judge selected submissions again with fresh seeds " in body
    assert "(keeps their results)" in body
    problems_page = client.get(reverse("admin:problems_problem_changelist")).content.decode()
    assert "Start over: judge every team&#x27;s newest submission" in problems_page
    assert "Add a run for the ranking: judge the top entries" in problems_page


def test_the_queue_shows_what_runs_where(client, admin, team, alice, passed):
    running = SubmissionFactory(
        team=team,
        user=alice,
        running=True,
        host="gpu-node-7",
        current_problem="all-gather",
        progress_done=1,
        progress_total=3,
        attempts=2,
        heartbeat_at=timezone.now() - timedelta(seconds=42),
    )
    waiting = SubmissionFactory(team=team, user=alice)
    client.force_login(admin)
    response = client.get(QUEUE)
    assert response.status_code == 200
    shown = [s.pk for s in response.context["cl"].result_list]
    assert sorted(shown) == sorted([running.pk, waiting.pk])  # the done one is not queued
    body = response.content.decode()
    assert "gpu-node-7" in body and "all-gather" in body and "1 / 3" in body
    assert "42 s ago" in body or "43 s ago" in body
    by_host = client.get(QUEUE, {"host": "gpu-node-7"}).context["cl"].result_list
    assert [s.pk for s in by_host] == [running.pk]


def test_the_queue_cancels_through_the_service(client, admin, team, alice):
    running = SubmissionFactory(team=team, user=alice, running=True)
    client.force_login(admin)
    client.post(QUEUE, {"action": "cancel", "_selected_action": [running.pk]})
    running.refresh_from_db()
    assert running.status == Submission.Status.CANCELLED
    assert _log(running) == ["Cancelled by admin."]


def test_the_log_is_read_only(client, admin, passed):
    client.force_login(admin)
    client.post(CHANGELIST, {"action": "cancel", "_selected_action": [passed.pk]})
    client.post(
        CHANGELIST,
        {"action": "disqualify", "_selected_action": [passed.pk], "apply": "1", "reason": "x"},
    )
    entry = LogEntry.objects.get()
    assert client.get(reverse("admin:admin_logentry_change", args=[entry.pk])).status_code == 200
    assert client.get(reverse("admin:admin_logentry_add")).status_code == 403
    assert client.post(reverse("admin:admin_logentry_delete", args=[entry.pk])).status_code == 403


@pytest.mark.parametrize("url", [CHANGELIST, QUEUE, LOG])
def test_the_curation_pages_are_for_staff_only(client, alice, url):
    assert client.get(url).status_code == 302  # anonymous: to the admin's login
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_bad_id_in_an_action_changes_nothing(client, admin, passed):
    client.force_login(admin)
    response = client.post(
        CHANGELIST,
        {
            "action": "disqualify",
            "_selected_action": [passed.pk + 999],
            "apply": "1",
            "reason": "x",
        },
    )
    assert response.status_code == 302
    assert not Submission.objects.disqualified().exists()
    assert not LogEntry.objects.exists()


def test_an_unknown_action_is_refused(client, admin, passed):
    client.force_login(admin)
    response = client.post(CHANGELIST, {"action": "explode", "_selected_action": [passed.pk]})
    assert response.status_code == 302  # back to the changelist, saying no action was chosen
    passed.refresh_from_db()
    assert passed.status == Submission.Status.DONE
