from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from portal.api.serializers import ProblemResultSerializer
from portal.submissions.models import Submission
from tests.portal.api.conftest import token_client
from tests.portal.bundles import solving, upload, zip_bundle
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db


def test_it_creates_a_submission_from_a_bundle(
    alice_api, alice, team, problems, sent, django_capture_on_commit_callbacks
):
    bundle = upload(solving("all-reduce", "all-gather"), name="mine.zip")
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_api.post(reverse("api:submissions"), {"bundle": bundle})
    assert response.status_code == 201, response.json()
    data = response.json()
    submission = Submission.objects.get(pk=data["id"])
    assert (submission.team, submission.user, submission.bundle_name) == (team, alice, "mine.zip")
    assert data["status"] == "queued"
    assert data["problems"] == ["all-gather", "all-reduce"]
    assert data["url"].endswith(reverse("api:submission", args=[submission.pk]))
    assert data["html_url"].endswith(reverse("submissions:detail", args=[submission.pk]))
    assert response["Location"] == data["url"]
    assert [request.submission_id for request, _ in sent] == [submission.pk]


def web_form_error(client, user, data: bytes, name: str) -> str:
    client.force_login(user)
    response = client.post(reverse("submissions:submit"), {"bundle": upload(data, name=name)})
    assert response.status_code == 400
    [message] = response.context["form"].errors["bundle"]
    return message


@pytest.mark.parametrize(
    "files,name",
    [
        ({"no-such-problem.py": "def solution(x):\n    return x\n"}, "b.zip"),
        ({"all-reduce.py": "def solution(x:\n"}, "b.zip"),
        ({"secret-op.py": "def solution(x):\n    return x\n"}, "b.zip"),
        ({"all-reduce.py": "x = 1\n"}, "b.rar"),
    ],
)
def test_a_bad_bundle_is_a_400_with_the_web_forms_message(
    client, alice_api, alice, problems, sent, files, name
):
    data = zip_bundle(files)
    response = alice_api.post(reverse("api:submissions"), {"bundle": upload(data, name=name)})
    assert response.status_code == 400
    assert response.json() == {"bundle": [web_form_error(client, alice, data, name)]}
    assert not Submission.objects.exists() and not sent


def test_a_missing_bundle_is_a_400(alice_api):
    response = alice_api.post(reverse("api:submissions"), {})
    assert response.status_code == 400
    assert response.json() == {"bundle": ["This field is required."]}


def test_submitting_needs_a_team(dana, submission_bundle):
    client = APIClient()
    client.force_login(dana)
    response = client.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 400
    assert response.json() == {"bundle": ["Join or create a team before submitting."]}


def test_submitting_requires_credentials(api, submission_bundle):
    response = api.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 401
    assert not Submission.objects.exists()


def test_submissions_list_the_own_teams_newest_first(alice_api, alice, bob, team, charlie):
    first = SubmissionFactory(team=team, user=alice, done=True)
    second = SubmissionFactory(team=team, user=bob)
    SubmissionFactory(team=charlie.membership.team, user=charlie)
    data = alice_api.get(reverse("api:submissions")).json()
    assert data["count"] == 2
    assert [s["id"] for s in data["results"]] == [second.pk, first.pk]
    assert [s["user"] for s in data["results"]] == ["bob", "alice"]
    assert "results" not in data["results"][0]  # per-problem results are on the detail


def test_the_list_is_paginated(alice_api, alice, team):
    SubmissionFactory.create_batch(3, team=team, user=alice)
    data = alice_api.get(reverse("api:submissions"), {"limit": 2}).json()
    assert (data["count"], len(data["results"])) == (3, 2)
    assert "offset=2" in data["next"]


def test_an_outsider_lists_none_of_the_teams_submissions(charlie_api, alice, team):
    SubmissionFactory(team=team, user=alice)
    assert charlie_api.get(reverse("api:submissions")).json()["count"] == 0


def test_listing_requires_credentials(api):
    assert api.get(reverse("api:submissions")).status_code == 401


def test_the_list_rejects_wrong_methods(alice_api):
    assert alice_api.put(reverse("api:submissions"), {}).status_code == 405
    assert alice_api.delete(reverse("api:submissions")).status_code == 405


@pytest.fixture
def done(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(
        submission=submission, problem=problems["all-reduce"], log="rank 0: my kernel's log"
    )
    return submission


def test_the_detail_shows_logs_to_the_team(alice_api, done):
    data = alice_api.get(reverse("api:submission", args=[done.pk])).json()
    assert data["results"][0]["log"] == "rank 0: my kernel's log"
    assert data["html_url"].endswith(reverse("submissions:detail", args=[done.pk]))


def test_the_detail_shows_logs_to_admins(client, admin, done):
    client.force_login(admin)
    data = client.get(reverse("api:submission", args=[done.pk])).json()
    assert data["results"][0]["log"] == "rank 0: my kernel's log"


def test_an_outsider_gets_no_detail_and_no_logs(charlie_api, done):
    response = charlie_api.get(reverse("api:submission", args=[done.pk]))
    assert response.status_code == 404
    assert "kernel's log" not in response.content.decode()


@pytest.fixture
def queued(alice, team, problems):
    return SubmissionFactory(team=team, user=alice)


def cancel(client, submission, method="post"):
    return getattr(client, method)(reverse("api:submission-cancel", args=[submission.pk]))


def test_a_member_cancels_a_queued_submission(bob, queued):
    response = cancel(token_client(bob), queued)
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["reason"]) == (
        "cancelled",
        "Cancelled by bob.",
    )
    queued.refresh_from_db()
    assert queued.status == Submission.Status.CANCELLED and queued.finished_at


def test_a_running_submission_can_be_cancelled(alice_api, alice, team):
    running = SubmissionFactory(team=team, user=alice, running=True)
    assert cancel(alice_api, running).json()["status"] == "cancelled"


def test_a_finished_submission_cannot_be_cancelled(alice_api, done):
    response = cancel(alice_api, done)
    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"Submission #{done.pk} is done: only a queued or running one can be cancelled."
    )
    done.refresh_from_db()
    assert done.status == Submission.Status.DONE


def test_an_outsider_cannot_cancel(charlie_api, queued):
    assert cancel(charlie_api, queued).status_code == 404
    queued.refresh_from_db()
    assert queued.status == Submission.Status.QUEUED


def test_cancelling_requires_credentials(api, queued):
    assert cancel(api, queued).status_code == 401


def test_cancel_rejects_get(alice_api, queued):
    assert cancel(alice_api, queued, method="get").status_code == 405


def test_cancel_of_a_bad_id_is_a_404(alice_api, queued):
    assert (
        alice_api.post(reverse("api:submission-cancel", args=[queued.pk + 99])).status_code == 404
    )


def test_a_team_at_its_daily_limit_gets_a_429_with_retry_after(
    settings, alice_api, alice, team, submission_bundle
):
    settings.PKB_SUBMISSIONS_PER_DAY = 1
    SubmissionFactory(team=team, user=alice, done=True)
    response = alice_api.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 429
    assert "used 1 of 1 ranked runs in the last 24 hours" in response.json()["detail"]
    assert 23 * 3600 < int(response["Retry-After"]) <= 24 * 3600
    assert Submission.objects.count() == 1


def test_a_team_with_too_many_running_gets_a_429(
    settings, alice_api, alice, team, submission_bundle
):
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 1
    SubmissionFactory(team=team, user=alice, running=True)
    response = alice_api.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 429
    assert "queued or running" in response.json()["detail"]
    assert "Retry-After" not in response  # it depends on when the running one finishes


def test_a_disqualified_submission_says_so(alice_api, done):
    done.disqualified_at = done.finished_at
    done.disqualification_reason = "timed the reference, not the kernel"
    done.save()
    data = alice_api.get(reverse("api:submission", args=[done.pk])).json()
    assert data["disqualified"] is True
    assert data["disqualification_reason"] == "timed the reference, not the kernel"
    listed = alice_api.get(reverse("api:submissions")).json()["results"][0]
    assert listed["disqualified"] is True


def test_results_leave_the_log_out_unless_the_view_allows_it(done):
    result = done.results.get()
    assert "log" not in ProblemResultSerializer(result).data
    assert ProblemResultSerializer(result, context={"show_logs": True}).data["log"]
