"""Code is private to its team until admins publish a problem's solutions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.submissions.models import ProblemResult
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def passed(team, alice, problems):
    """alice's done submission that passed all-reduce."""
    submission = SubmissionFactory(team=team, user=alice, done=True, bundle_name="fast.zip")
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"])
    return submission


def _url(submission) -> str:
    return reverse("submissions:bundle", args=[submission.pk])


def _publish(problem, *, hours_ago: float = 1) -> None:
    problem.solutions_public_after = timezone.now() - timedelta(hours=hours_ago)
    problem.save()


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_the_team_downloads_its_bundle(client, bob, passed):
    client.force_login(bob)
    response = client.get(_url(passed))
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="submission-{passed.pk}-fast.zip"'
    )
    assert _body(response) == Path(passed.bundle.path).read_bytes()


def test_staff_download_any_bundle(client, admin, passed):
    client.force_login(admin)
    assert client.get(_url(passed)).status_code == 200


def test_other_teams_get_a_404_before_publication(client, charlie, passed):
    client.force_login(charlie)
    assert client.get(_url(passed)).status_code == 404


def test_anonymous_users_are_sent_to_log_in_before_publication(client, passed):
    response = client.get(_url(passed))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_anyone_downloads_a_passing_bundle_once_solutions_are_public(
    client, charlie, passed, problems
):
    _publish(problems["all-reduce"])
    assert client.get(_url(passed)).status_code == 200  # anonymous
    client.force_login(charlie)
    assert _body(client.get(_url(passed))) == Path(passed.bundle.path).read_bytes()


def test_a_future_publication_date_keeps_it_private(client, charlie, passed, problems):
    _publish(problems["all-reduce"], hours_ago=-1)
    client.force_login(charlie)
    assert client.get(_url(passed)).status_code == 404


def test_publication_covers_only_bundles_that_passed_that_problem(
    client, charlie, team, alice, problems
):
    _publish(problems["all-reduce"])
    failed = SubmissionFactory(team=team, user=alice, done=True)
    ProblemResultFactory(
        submission=failed, problem=problems["all-reduce"], status=ProblemResult.Status.WRONG_ANSWER
    )
    other = SubmissionFactory(team=team, user=alice, done=True)
    ProblemResultFactory(submission=other, problem=problems["all-gather"])
    client.force_login(charlie)
    assert client.get(_url(failed)).status_code == 404
    assert client.get(_url(other)).status_code == 404


def test_the_download_rejects_wrong_method(client, alice, passed):
    client.force_login(alice)
    assert client.post(_url(passed)).status_code == 405


def test_a_bad_id_is_a_404(client, alice, passed):
    client.force_login(alice)
    assert client.get(reverse("submissions:bundle", args=[passed.pk + 999])).status_code == 404


def test_the_upload_form_links_each_bundle(client, alice, passed):
    client.force_login(alice)
    assert _url(passed) in client.get(reverse("submissions:submit")).content.decode()


def _solutions(problem) -> str:
    return reverse("submissions:solutions", args=[problem.slug])


def test_the_solutions_page_lists_each_teams_fastest_pass_once_public(
    client, passed, team, alice, charlie_team, problems
):
    problem = problems["all-reduce"]
    faster = SubmissionFactory(team=team, user=alice, done=True, bundle_name="faster.zip")
    ProblemResultFactory(submission=faster, problem=problem, speedup=3.0)
    theirs = SubmissionFactory(team=charlie_team, done=True, bundle_name="charlie.zip")
    ProblemResultFactory(submission=theirs, problem=problem, speedup=2.0)
    _publish(problem)
    response = client.get(_solutions(problem))  # anonymous
    assert response.status_code == 200
    rows = [(r.submission.team.name, r.submission.bundle_name) for r in response.context["results"]]
    assert rows == [("Alice's Kernels", "faster.zip"), ("Charlie Ltd", "charlie.zip")]
    assert _url(faster) in response.content.decode()


def test_the_solutions_page_lists_nothing_before_publication(client, passed, problems):
    problem = problems["all-reduce"]
    _publish(problem, hours_ago=-2)
    response = client.get(_solutions(problem))
    assert response.status_code == 200
    assert response.context["results"] == []
    assert _url(passed) not in response.content.decode()
    assert "private until" in response.content.decode()


def test_the_solutions_page_rejects_wrong_method_and_unpublished_problems(client, problems):
    assert client.post(_solutions(problems["all-reduce"])).status_code == 405
    assert client.get(_solutions(problems["secret-op"])).status_code == 404
    assert client.get(reverse("submissions:solutions", args=["no-such"])).status_code == 404


def test_the_submission_page_links_its_bundle_for_the_team(client, alice, passed):
    client.force_login(alice)
    page = client.get(reverse("submissions:detail", args=[passed.pk])).content.decode()
    assert f'href="{_url(passed)}"' in page


def test_the_problem_page_links_the_solutions_only_once_public(client, problems):
    problem = problems["all-reduce"]
    page = reverse("problems:detail", args=[problem.slug])
    solutions = reverse("submissions:solutions", args=[problem.slug])
    assert solutions not in client.get(page).content.decode()
    _publish(problem)
    assert solutions in client.get(page).content.decode()
