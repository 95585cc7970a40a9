"""Results remember the problem version they were judged against: after a version bump the
stale ones leave the leaderboard, the submission page says why, and a re-evaluation brings
the teams back once their bundles are judged again."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db.models import F
from django.urls import reverse

from evaluator.contract import EvaluationOutcome, ProblemStatus, finished_message
from evaluator.contract import ProblemResult as Reported
from portal.leaderboard.selectors import leaderboard, problem_ranking
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import (
    evaluation_finish,
    evaluation_start,
    problem_best_submissions,
    problem_reevaluate,
    submission_create,
)
from tests.portal.bundles import solving, upload
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

CATEGORY = Category.COLLECTIVE.value


def _passed(team, problem, *, speedup: float) -> Submission:
    submission = SubmissionFactory(team=team, done=True, problems=[problem.slug])
    ProblemResultFactory(submission=submission, problem=problem, speedup=speedup)
    return submission


def _bump(problem: Problem) -> None:
    # What `sync_problems` does when the problem's code or tolerance changed.
    Problem.objects.filter(pk=problem.pk).update(version=F("version") + 1)
    problem.refresh_from_db()


def _board() -> dict[str, int]:
    """Problems solved per team on the collective board (the baseline left out)."""
    rows = leaderboard(profile="cpu", category=CATEGORY).rows
    return {r.team_name: r.score.solved for r in rows if not r.is_baseline and r.score.solved}


def _judge(submission: Submission, *, speedup: float) -> None:
    """The evaluator host's side of an attempt: started, then one passing result."""
    submission.refresh_from_db()
    eid = str(submission.evaluation_id)
    assert evaluation_start(evaluation_id=eid, host="cpu-host")
    reported = [
        Reported(slug, ProblemStatus.PASSED, 2, speedup=speedup) for slug in submission.problems
    ]
    message = finished_message(evaluation_id=eid, outcome=EvaluationOutcome.DONE, results=reported)
    assert evaluation_finish(message=message)


def test_a_version_bump_drops_stale_results_from_the_leaderboard(team, charlie_team, problems):
    problem = problems["all-reduce"]
    _passed(team, problem, speedup=3.0)
    _passed(charlie_team, problem, speedup=2.0)
    _passed(charlie_team, problems["all-gather"], speedup=1.5)
    assert _board() == {"Alice's Kernels": 1, "Charlie Ltd": 2}
    _bump(problem)
    assert _board() == {"Charlie Ltd": 1}  # all-gather was not bumped
    assert problem_ranking(problem=problem, profile="cpu") == []


def test_reevaluation_brings_the_teams_back_once_rejudged(
    team, charlie_team, problems, sent, django_capture_on_commit_callbacks
):
    problem = problems["all-reduce"]
    _passed(team, problem, speedup=1.2)
    mine = _passed(team, problem, speedup=3.0)  # the newest code counts
    theirs = _passed(charlie_team, problem, speedup=2.0)
    _bump(problem)
    with django_capture_on_commit_callbacks(execute=True):
        requeued = problem_reevaluate(problem=problem, reason="all-reduce is now version 2.")
    assert requeued == sorted([mine.pk, theirs.pk])
    assert sorted(request.submission_id for request, _ in sent) == requeued
    assert _board() == {}
    _judge(mine, speedup=2.5)
    assert _board() == {"Alice's Kernels": 1}
    _judge(theirs, speedup=1.8)
    assert _board() == {"Alice's Kernels": 1, "Charlie Ltd": 1}
    ranking = problem_ranking(problem=problem, profile="cpu")
    assert [(row.team_name, row.speedup) for row in ranking] == [
        ("Alice's Kernels", 2.5),
        ("Charlie Ltd", 1.8),
    ]
    assert set(
        ProblemResult.objects.filter(submission__in=[mine, theirs]).values_list(
            "problem_version", flat=True
        )
    ) == {2}


def test_a_result_is_judged_against_the_version_of_when_it_was_queued(
    alice, team, problems, sent, django_capture_on_commit_callbacks
):
    problem = problems["all-reduce"]
    with django_capture_on_commit_callbacks(execute=True):
        submission = submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert submission.problem_versions == {"all-reduce": 1}
    _bump(problem)  # while the host evaluates it
    _judge(submission, speedup=2.0)
    result = ProblemResult.objects.get(submission=submission)
    assert result.problem_version == 1 and result.is_stale
    assert _board() == {}


def test_a_requeue_judges_against_the_current_version(
    team, problems, django_capture_on_commit_callbacks
):
    problem = problems["all-reduce"]
    submission = _passed(team, problem, speedup=3.0)
    _bump(problem)
    with django_capture_on_commit_callbacks(execute=True):
        problem_reevaluate(problem=problem, reason="v2")
    submission.refresh_from_db()
    assert submission.problem_versions == {"all-reduce": 2}


def test_a_submission_queued_before_versions_were_recorded_gets_the_current_one(team, problems):
    problem = problems["all-reduce"]
    _bump(problem)
    submission = SubmissionFactory(team=team, problems=["all-reduce"], problem_versions={})
    _judge(submission, speedup=2.0)
    assert ProblemResult.objects.get(submission=submission).problem_version == 2
    assert _board() == {"Alice's Kernels": 1}


def test_a_team_whose_newest_code_is_fresh_gets_no_older_code_judged_again(team, problems):
    problem = problems["all-reduce"]
    _passed(team, problem, speedup=4.0)  # stale, faster, older code
    _bump(problem)
    fresh = _passed(team, problem, speedup=1.5)
    assert problem_best_submissions(problem=problem) == [fresh]


def test_a_team_whose_newest_code_is_stale_gets_it_judged_again(team, problems):
    problem = problems["all-reduce"]
    _passed(team, problem, speedup=4.0)
    newest = _passed(team, problem, speedup=1.5)
    _bump(problem)
    assert problem_best_submissions(problem=problem) == [newest]


def test_a_team_with_only_stale_results_is_requeued(team, problems):
    problem = problems["all-reduce"]
    failing = SubmissionFactory(team=team, done=True)
    ProblemResultFactory(
        submission=failing, problem=problem, status=ProblemResult.Status.WRONG_ANSWER
    )
    _bump(problem)
    assert problem_best_submissions(problem=problem) == [failing]


def test_the_submission_page_says_a_stale_result_is_not_ranked(client, alice, team, problems):
    submission = _passed(team, problems["all-reduce"], speedup=3.0)
    url = reverse("submissions:detail", args=[submission.pk])
    client.force_login(alice)
    assert "not ranked until re-evaluated" not in client.get(url).content.decode()
    _bump(problems["all-reduce"])
    html = client.get(url).content.decode()
    assert (
        "judged against version 1; the problem is now at version 2, "
        "not ranked until re-evaluated" in html
    )


def test_the_problem_and_team_pages_render_after_a_bump(client, team, charlie_team, problems):
    problem = problems["all-reduce"]
    _passed(team, problem, speedup=3.0)
    _passed(charlie_team, problem, speedup=2.0)
    _bump(problem)
    response = client.get(reverse("problems:detail", args=[problem.slug]))
    assert response.status_code == 200
    assert "Alice&#x27;s Kernels" not in response.content.decode()
    response = client.get(reverse("leaderboard:team", args=[team.slug]), {"profile": "cpu"})
    assert response.status_code == 200
    assert response.context["standing"].best == []


def test_the_migration_counts_existing_results_at_the_current_version(team, problems):
    # Before the migration no result said its version: each gets its problem's current one.
    migration = importlib.import_module("portal.submissions.migrations.0004_problem_versions")
    problem = problems["all-reduce"]
    _bump(problem)
    _bump(problem)
    ProblemResultFactory(
        submission=SubmissionFactory(team=team, done=True), problem=problem, problem_version=1
    )
    migration.judged_at_current_version(apps, None)
    assert list(ProblemResult.objects.values_list("problem_version", flat=True)) == [3]
    assert _board() == {"Alice's Kernels": 1}
