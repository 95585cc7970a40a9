"""Admins' services: disqualification keeps results off the ranking; re-evaluation after a
version bump; problems limited to some hardware profiles."""

from __future__ import annotations

import pytest

from portal.accounts.services import team_disqualify, team_reinstate
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import (
    SubmissionError,
    problem_best_submissions,
    problem_reevaluate,
    submission_create,
    submission_disqualify,
    submission_reinstate,
)
from tests.portal.bundles import solving, upload
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _result(team, problem, *, speedup=1.5, status=ProblemResult.Status.PASSED, **kwargs):
    submission = SubmissionFactory(team=team, done=True, problems=[problem.slug])
    return ProblemResultFactory(
        submission=submission, problem=problem, speedup=speedup, status=status, **kwargs
    )


def _counted_teams() -> set[str]:
    return set(
        ProblemResult.objects.counted(profile="cpu").values_list(
            "submission__team__name", flat=True
        )
    )


def test_a_disqualified_submission_never_counts_until_reinstated(team, charlie_team, problems):
    mine = _result(team, problems["all-reduce"])
    _result(charlie_team, problems["all-reduce"])
    assert submission_disqualify(submission=mine.submission, reason="Cached outputs.")
    assert _counted_teams() == {"Charlie Ltd"}
    mine.submission.refresh_from_db()
    assert mine.submission.is_disqualified
    assert mine.submission.disqualification_reason == "Cached outputs."
    assert submission_reinstate(submission=mine.submission)
    assert _counted_teams() == {"Alice's Kernels", "Charlie Ltd"}
    assert not submission_reinstate(submission=mine.submission)


def test_a_disqualified_team_never_counts_until_reinstated(team, charlie_team, problems):
    _result(team, problems["all-reduce"])
    _result(team, problems["tp-linear"])
    _result(charlie_team, problems["all-reduce"])
    team_disqualify(team=team, reason="Read the reference's outputs.")
    assert _counted_teams() == {"Charlie Ltd"}
    team_reinstate(team=team)
    assert _counted_teams() == {"Alice's Kernels", "Charlie Ltd"}


def test_a_disqualification_needs_a_reason(team, problems):
    submission = _result(team, problems["all-reduce"]).submission
    with pytest.raises(SubmissionError, match="needs a reason"):
        submission_disqualify(submission=submission, reason=" ")
    submission.refresh_from_db()
    assert not submission.is_disqualified


def test_a_second_disqualification_updates_the_reason(team, problems):
    submission = _result(team, problems["all-reduce"]).submission
    submission_disqualify(submission=submission, reason="First look.")
    assert not submission_disqualify(submission=submission, reason="Timer patched.")
    submission.refresh_from_db()
    assert submission.disqualification_reason == "Timer patched."


def test_the_counted_submission_per_team_is_its_newest_trusted_pass(team, charlie_team, problems):
    problem = problems["all-reduce"]
    _result(team, problem, speedup=3.0)  # faster, but older code
    newest = _result(team, problem, speedup=1.2)
    _result(team, problem, speedup=9.0, flags=["below_floor"])  # flagged: not trusted
    _result(team, problems["tp-linear"], speedup=50.0)  # another problem
    dq = _result(team, problem, speedup=20.0)
    submission_disqualify(submission=dq.submission, reason="Cheated.")
    failing = _result(charlie_team, problem, status=ProblemResult.Status.WRONG_ANSWER)
    assert problem_best_submissions(problem=problem) == sorted(
        [newest.submission, failing.submission], key=lambda s: s.pk
    )


def test_it_reevaluates_each_teams_best_submission_as_a_new_attempt(
    team, charlie_team, problems, sent, django_capture_on_commit_callbacks
):
    problem = problems["all-reduce"]
    _result(team, problem, speedup=3.0)
    best = _result(team, problem, speedup=1.0).submission  # the newest code counts
    other = _result(charlie_team, problem, speedup=2.0).submission
    old_evaluation = best.evaluation_id
    with django_capture_on_commit_callbacks(execute=True):
        requeued = problem_reevaluate(problem=problem, reason="all-reduce is now version 2.")
    assert requeued == sorted([best.pk, other.pk])
    best.refresh_from_db()
    assert best.status == Submission.Status.QUEUED and best.attempts == 2
    assert best.evaluation_id != old_evaluation
    assert best.reason == "all-reduce is now version 2."
    assert not best.results.exists()  # replaced when the new attempt reports
    assert sorted(request.submission_id for request, _ in sent) == requeued
    assert Submission.objects.count() == 3  # re-queued, not copied


def test_reevaluation_skips_running_submissions(team, problems):
    problem = problems["all-reduce"]
    running = SubmissionFactory(team=team, running=True)
    ProblemResultFactory(submission=running, problem=problem)
    assert problem_reevaluate(problem=problem, reason="v2") == []


def test_a_problem_limited_to_other_hardware_is_refused_on_this_one(
    alice, problems, settings, sent
):
    problems["tp-linear"].profiles = ["h200x4", "h200x8"]
    problems["tp-linear"].save()
    with pytest.raises(SubmissionError, match=r"Not judged on CPU.*: tp-linear\. Remove it"):
        submission_create(user=alice, upload=upload(solving("all-reduce", "tp-linear")))
    assert not Submission.objects.exists() and sent == []


def test_a_problem_allowed_on_this_hardware_is_judged(
    alice, problems, sent, django_capture_on_commit_callbacks
):
    problems["tp-linear"].profiles = ["cpu", "h200x4"]
    problems["tp-linear"].save()
    with django_capture_on_commit_callbacks(execute=True):
        created = submission_create(user=alice, upload=upload(solving("all-reduce", "tp-linear")))
    assert created.problems == ["all-reduce", "tp-linear"]
    assert sent[0][0].problems == ["all-reduce", "tp-linear"]


def test_runs_on_means_every_profile_when_empty(problems):
    problem = problems["all-reduce"]
    assert problem.runs_on("cpu") and problem.runs_on("h200x8")
    problem.profiles = ["h200x8"]
    assert problem.runs_on("h200x8") and not problem.runs_on("cpu")


def test_other_teams_keep_counting_when_one_is_disqualified():
    # Two fresh teams, no fixtures: disqualifying one leaves the other's ranking alone.
    from tests.portal.factories import ProblemFactory

    problem = ProblemFactory(slug="all-reduce")
    a, b = TeamFactory(), TeamFactory()
    _result(a, problem)
    _result(b, problem)
    team_disqualify(team=a, reason="x")
    assert _counted_teams() == {b.name}
