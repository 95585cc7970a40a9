"""Admins curate problems in the admin: status, weight, hardware, public solutions,
re-evaluation after a version bump; every action is logged."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from portal.problems.models import Problem
from portal.submissions.models import Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:problems_problem_changelist")


def _change(problem) -> str:
    return reverse("admin:problems_problem_change", args=[problem.pk])


def _log(problem) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=str(problem.pk))
        .order_by("action_time", "id")
        .values_list("change_message", flat=True)
    )


@pytest.mark.parametrize(
    ("action", "status"),
    [("publish", "published"), ("hide", "hidden"), ("retire", "retired")],
)
def test_status_actions_change_and_log_only_what_changed(client, admin, problems, action, status):
    client.force_login(admin)
    chosen = [problems[s].pk for s in ("all-reduce", "secret-op", "old-op")]
    response = client.post(CHANGELIST, {"action": action, "_selected_action": chosen})
    assert response.status_code == 302
    assert set(Problem.objects.filter(pk__in=chosen).values_list("status", flat=True)) == {status}
    logged = LogEntry.objects.filter(change_message=f"Status set to {status}.")
    assert logged.count() == 2  # the third one had that status already


def test_the_change_form_sets_hardware_weight_and_public_solutions(client, admin, problems):
    problem = problems["tp-linear"]
    client.force_login(admin)
    page = client.get(_change(problem)).content.decode()
    assert "4x H200 (NVLink)" in page and "none ticked: all of them" in page
    response = client.post(
        _change(problem),
        {
            "title": problem.title,
            "category": problem.category,
            "status": "published",
            "weight": "2.5",
            "profiles": ["h200x4", "h200x8"],
            "solutions_public_after_0": "2026-12-01",
            "solutions_public_after_1": "12:00:00",
            "description": problem.description,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    problem.refresh_from_db()
    assert problem.profiles == ["h200x4", "h200x8"] and problem.weight == 2.5
    assert problem.solutions_public_after.isoformat() == "2026-12-01T12:00:00+00:00"
    assert not problem.runs_on("cpu")
    assert _log(problem)  # Django logs the changed fields itself
    assert "h200x4, h200x8" in client.get(CHANGELIST).content.decode()


def test_an_unknown_hardware_profile_is_refused(client, admin, problems):
    problem = problems["tp-linear"]
    client.force_login(admin)
    response = client.post(
        _change(problem),
        {
            "title": problem.title,
            "category": problem.category,
            "status": "published",
            "weight": "1",
            "profiles": ["tpu-v9"],
            "description": problem.description,
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    problem.refresh_from_db()
    assert problem.profiles == []


def test_reevaluation_requeues_each_teams_newest_submission_and_logs_it(
    client, admin, team, charlie_team, problems, sent, django_capture_on_commit_callbacks
):
    problem = problems["all-reduce"]
    older = SubmissionFactory(team=team, done=True)  # older code: the newest counts
    ProblemResultFactory(submission=older, problem=problem, speedup=4.0)
    newest = SubmissionFactory(team=team, done=True)
    ProblemResultFactory(submission=newest, problem=problem, speedup=1.1)
    theirs = SubmissionFactory(team=charlie_team, done=True)
    ProblemResultFactory(submission=theirs, problem=problem, speedup=2.0)
    Problem.objects.filter(pk=problem.pk).update(version=3)
    client.force_login(admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            CHANGELIST, {"action": "reevaluate", "_selected_action": [problem.pk]}
        )
    assert response.status_code == 302
    assert sorted(r.submission_id for r, _ in sent) == sorted([newest.pk, theirs.pk])
    newest.refresh_from_db()
    assert newest.status == Submission.Status.QUEUED
    assert newest.reason == "Re-evaluated by admin: all-reduce is at version 3."
    older.refresh_from_db()
    assert older.status == Submission.Status.DONE
    ids = ", ".join(f"#{pk}" for pk in sorted([newest.pk, theirs.pk]))
    assert _log(problem) == [f"Re-evaluation queued: submissions {ids}."]


def test_the_problem_admin_is_for_staff_only(client, alice, problems):
    client.force_login(alice)
    for url in (CHANGELIST, _change(problems["all-reduce"])):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_bad_problem_id_redirects_with_a_message(client, admin, problems):
    client.force_login(admin)
    response = client.get(reverse("admin:problems_problem_change", args=[987654]))
    assert response.status_code == 302  # Django's admin: "doesn't exist. Perhaps deleted?"


def test_saving_a_problem_as_a_browser_sends_it_is_not_an_edit_of_its_description(client, admin):
    from portal.problems.services import problems_sync
    from tests.portal.problems.test_problems_sync import FakeSpec

    problems_sync(catalog=[FakeSpec("all-reduce", description="Sum over ranks.\n\nIn place.")])
    problem = Problem.objects.get(slug="all-reduce")
    client.force_login(admin)
    # A browser sends a textarea's line breaks as CRLF (the HTML standard's form encoding).
    sent = {"title": problem.title, "category": problem.category, "status": "published"}
    sent |= {"weight": "1", "description": problem.description.replace("\n", "\r\n")}
    response = client.post(_change(problem), sent)
    assert response.status_code == 302, response.content.decode()[:2000]
    problem.refresh_from_db()
    assert problem.description == "Sum over ranks.\n\nIn place."
    report = problems_sync(
        catalog=[FakeSpec("all-reduce", description="Sum over ranks.\n\nIn place.")]
    )
    assert report.kept == []


def test_a_description_saved_with_crlf_before_takes_the_catalogs_fix(client, admin):
    from portal.problems.services import problems_sync
    from tests.portal.problems.test_problems_sync import FakeSpec

    problems_sync(catalog=[FakeSpec("all-reduce", description="Sum over ranks.\n\nIn place.")])
    Problem.objects.filter(slug="all-reduce").update(description="Sum over ranks.\r\n\r\nIn place.")
    report = problems_sync(
        catalog=[FakeSpec("all-reduce", description="Sum over ranks.\n\nIn place.")]
    )
    assert report.kept == []
    assert Problem.objects.get(slug="all-reduce").description == "Sum over ranks.\n\nIn place."
