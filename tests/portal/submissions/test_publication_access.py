"""Publishing one problem's solutions publishes that problem's code, nothing more.

A bundle solving a public problem and others gives outsiders an archive of the public
problem's file only; the team and staff still get the bundle as uploaded. And every
endpoint that shows a submission keeps its access rules on both sides of the date.
"""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from portal.problems.models import Problem
from tests.portal.api.conftest import token_client
from tests.portal.bundles import SOLUTION, zip_bundle
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

FILES = {
    "all-reduce.py": SOLUTION,
    "all-gather.py": "def solution(x):\n    return 'all-gather, not public yet'\n",
    "secret-op.py": "def solution(x):\n    return 'a hidden problem'\n",
    "_common.py": "SHARED = 'helpers may serve any problem'\n",
}
SLUGS = ["all-gather", "all-reduce", "secret-op"]


def _set_public(problem: Problem, *, hours_ago: float | None) -> None:
    when = None if hours_ago is None else timezone.now() - timedelta(hours=hours_ago)
    problem.solutions_public_after = when
    problem.save()


@pytest.fixture
def mixed(team, alice, problems):
    """alice's bundle that passed all three problems; only all-reduce is public."""
    submission = SubmissionFactory(
        team=team, user=alice, done=True, problems=SLUGS, bundle_name="mine.zip"
    )
    submission.bundle.save("mine.zip", ContentFile(zip_bundle(FILES)))
    for slug in SLUGS:
        ProblemResultFactory(submission=submission, problem=problems[slug])
    _set_public(problems["all-reduce"], hours_ago=1)
    _set_public(problems["all-gather"], hours_ago=-1)  # tomorrow
    _set_public(problems["secret-op"], hours_ago=1)  # a date, but the problem is hidden
    return submission


def _download(client, submission):
    response = client.get(reverse("submissions:bundle", args=[submission.pk]))
    return response, b"".join(response.streaming_content) if response.status_code == 200 else b""


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_outsiders_get_only_the_public_problems_files(client, charlie, mixed):
    for who in (None, charlie):
        if who:
            client.force_login(who)
        response, data = _download(client, mixed)
        assert response.status_code == 200
        assert response["Content-Disposition"] == (
            f'attachment; filename="submission-{mixed.pk}-public.zip"'
        )
        assert _members(data) == {"all-reduce.py": SOLUTION.encode()}


def test_the_team_and_staff_still_get_the_bundle_as_uploaded(client, bob, admin, mixed):
    for who in (bob, admin):
        client.force_login(who)
        response, data = _download(client, mixed)
        assert response["Content-Disposition"].endswith('-mine.zip"')
        assert data == mixed.bundle.open("rb").read()


def test_a_problem_becomes_part_of_the_download_on_its_date(client, charlie, mixed, problems):
    client.force_login(charlie)
    _set_public(problems["all-gather"], hours_ago=0.5)
    assert set(_members(_download(client, mixed)[1])) == {"all-reduce.py", "all-gather.py"}


def test_the_whole_bundle_is_served_once_all_its_problems_are_public(
    client, charlie, mixed, problems
):
    _set_public(problems["all-gather"], hours_ago=1)
    problems["secret-op"].status = Problem.Status.PUBLISHED
    problems["secret-op"].save()
    client.force_login(charlie)
    response, data = _download(client, mixed)
    assert response["Content-Disposition"].endswith('-mine.zip"')
    assert set(_members(data)) == set(FILES)


def test_taking_the_date_back_closes_the_download(client, charlie, mixed, problems):
    _set_public(problems["all-reduce"], hours_ago=None)
    client.force_login(charlie)
    assert _download(client, mixed)[0].status_code == 404


# Every endpoint that shows a submission, for an outsider (charlie), before and after the
# date that publishes the solutions of the problem it passed: publication opens the bundle's
# public part and the solutions page, and nothing else.
ENDPOINTS = {
    "page": (lambda s: reverse("submissions:detail", args=[s.pk]), 404, 404),
    "status": (lambda s: reverse("submissions:status", args=[s.pk]), 404, 404),
    "bundle": (lambda s: reverse("submissions:bundle", args=[s.pk]), 404, 200),
    "api-detail": (lambda s: reverse("api:submission", args=[s.pk]), 404, 404),
}


@pytest.mark.parametrize("published", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_an_outsider_on_either_side_of_the_date(
    client, charlie, mixed, problems, endpoint, published
):
    if not published:
        _set_public(problems["all-reduce"], hours_ago=-1)
    url, before, after = ENDPOINTS[endpoint]
    client.force_login(charlie)
    assert client.get(url(mixed)).status_code == (after if published else before)


@pytest.mark.parametrize("published", [False, True], ids=["before", "after"])
def test_an_outsider_cannot_cancel_on_either_side_of_the_date(charlie, mixed, problems, published):
    if not published:
        _set_public(problems["all-reduce"], hours_ago=-1)
    url = reverse("api:submission-cancel", args=[mixed.pk])
    assert token_client(charlie).post(url).status_code == 404


@pytest.mark.parametrize("published", [False, True], ids=["before", "after"])
def test_anonymous_visitors_on_either_side_of_the_date(client, mixed, problems, published):
    if not published:
        _set_public(problems["all-reduce"], hours_ago=-1)
    for name in ("submissions:detail", "submissions:status"):
        assert client.get(reverse(name, args=[mixed.pk])).status_code == 302  # to log in
    assert APIClient().get(reverse("api:submission", args=[mixed.pk])).status_code == 401
    bundle = client.get(reverse("submissions:bundle", args=[mixed.pk]))
    assert bundle.status_code == (200 if published else 302)
    solutions = client.get(reverse("submissions:solutions", args=["all-reduce"]))
    assert (f"/submissions/{mixed.pk}/bundle/" in solutions.content.decode()) == published
