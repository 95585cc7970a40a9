"""Staff mark a submission as an example, or clear the mark, in the admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.leaderboard.selectors import leaderboard_rows
from portal.submissions.models import Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:submissions_submission_changelist")


@pytest.fixture
def passed(team, admin, problems):
    team.memberships.create(user=admin)
    submission = SubmissionFactory(team=team, user=admin, done=True, bundle_name="symm.zip")
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=2.0)
    return submission


def _change(client, submission, label: str):
    url = reverse("admin:submissions_submission_change", args=[submission.pk])
    inline = {
        "results-TOTAL_FORMS": "0",
        "results-INITIAL_FORMS": "0",
        "artifacts-TOTAL_FORMS": "0",
        "artifacts-INITIAL_FORMS": "0",
    }
    return client.post(url, {"example_label": label, **inline})


def test_staff_mark_a_submission_as_an_example_and_the_board_follows(client, admin, passed):
    client.force_login(admin)
    assert [r.rank for r in leaderboard_rows(profile="cpu") if r.team_slug] == [1]
    response = _change(client, passed, "Example: examples/symm")
    assert response.status_code == 302, response.content.decode()[:2000]
    passed.refresh_from_db()
    assert passed.example_label == "Example: examples/symm"
    [row] = [r for r in leaderboard_rows(profile="cpu") if r.is_example]
    assert row.label == "Example: examples/symm" and row.rank is None
    assert not [r for r in leaderboard_rows(profile="cpu") if r.rank]

    _change(client, passed, "")
    passed.refresh_from_db()
    assert not passed.is_example


def test_the_other_fields_stay_read_only(client, admin, passed):
    client.force_login(admin)
    url = reverse("admin:submissions_submission_change", args=[passed.pk])
    client.post(
        url,
        {
            "example_label": "x",
            "status": "queued",
            "results-TOTAL_FORMS": "0",
            "results-INITIAL_FORMS": "0",
            "artifacts-TOTAL_FORMS": "0",
            "artifacts-INITIAL_FORMS": "0",
        },
    )
    passed.refresh_from_db()
    assert passed.status == Submission.Status.DONE


def test_the_changelist_filters_examples(client, admin, passed, team):
    SubmissionFactory(team=team, example_label="Example: examples/fast", bundle_name="fast.zip")
    client.force_login(admin)
    page = client.get(CHANGELIST, {"example": "yes"}).content.decode()
    assert "fast.zip" in page and "symm.zip" not in page
    page = client.get(CHANGELIST, {"example": "no"}).content.decode()
    assert "symm.zip" in page and "fast.zip" not in page
