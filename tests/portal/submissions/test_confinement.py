"""Issue 50: the portal never ranks a result judged without the sandbox its hardware
profile requires (evaluator/host/profiles.py: bubblewrap, the candidate frozen while the
reference is timed). The finished message goes through the Celery task the portal's
worker runs, on the real database; the result is kept, shown to its team flagged with the
reason, and counted on no board, unless an operator names the profile in
PKB_RANK_WEAKER_SANDBOX (a development setting)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from evaluator.contract import EvaluationOutcome, finished_message
from portal.leaderboard.selectors import leaderboard_rows, problem_board
from portal.submissions import tasks
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import evaluation_start, rerun_queue
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import CONFINED, judge_rerun, passed

pytestmark = pytest.mark.django_db

WEAKER = ProblemResult.Flag.WEAKER_SANDBOX.value
NOT_FROZEN = ProblemResult.Flag.NOT_FROZEN.value


@pytest.fixture(autouse=True)
def _no_profile_named(settings):
    # The suite names "cpu" for its development workers (tests/conftest.py); here none is.
    settings.PKB_RANK_WEAKER_SANDBOX = ()


def record(team, user, environment, *, profile="cpu", speedup=2.0) -> Submission:
    """A ranked submission judged on `profile`, its finished message recorded by the task
    the portal's Celery worker runs, after a trip through JSON as over Redis."""
    submission = SubmissionFactory(team=team, user=user, profile=profile, problems=["all-reduce"])
    eid = str(submission.evaluation_id)
    assert evaluation_start(evaluation_id=eid, host=f"{profile}-host")
    message = finished_message(
        evaluation_id=eid,
        outcome=EvaluationOutcome.DONE,
        results=[passed("all-reduce", speedup)],
        environment={"torch": "2.11", **environment},
    )
    assert tasks.evaluation_finished(json.loads(json.dumps(message))) is True
    submission.refresh_from_db()
    return submission


def ranked_teams(profile="cpu") -> list[str]:
    return [r.team_name for r in leaderboard_rows(profile=profile) if not r.is_baseline]


def on_problem_board(problem, profile="cpu") -> list[str]:
    return [r.team_name for r in problem_board(problem=problem, profile=profile).ranking]


@pytest.mark.parametrize(
    ("environment", "flags"),
    [
        ({"sandbox": "namespaces", "candidate_frozen": False}, [WEAKER, NOT_FROZEN]),
        ({"sandbox": None, "candidate_frozen": True}, [WEAKER]),
        ({"sandbox": "bubblewrap", "candidate_frozen": False}, [NOT_FROZEN]),
        ({}, [WEAKER, NOT_FROZEN]),  # a host that does not say had neither
    ],
    ids=["namespaces-unfrozen", "no-sandbox", "unfrozen", "unreported"],
)
def test_a_result_judged_with_less_than_its_profile_requires_is_flagged_and_never_ranks(
    alice, team, charlie, charlie_team, problems, environment, flags
):
    confined = record(charlie_team, charlie, CONFINED, speedup=1.5)
    weaker = record(team, alice, environment, speedup=3.0)
    assert weaker.status == Submission.Status.DONE
    result = weaker.results.get()
    assert result.flags == flags and result.is_flagged
    assert result.runs.get().flags == flags  # its first judged run, too
    assert confined.results.get().flags == []
    # The faster result is on no board; the one judged in the required sandbox is.
    assert ranked_teams() == [charlie_team.name]
    problem = problems["all-reduce"]
    assert team.name not in on_problem_board(problem)
    assert charlie_team.name in on_problem_board(problem)


def test_the_submission_page_says_why_it_is_not_ranked(client, alice, team, problems):
    submission = record(team, alice, {"sandbox": "namespaces", "candidate_frozen": False})
    client.force_login(alice)
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert '<span class="badge flagged"' in page
    reasons = "; ".join(ProblemResult.Flag(f).label for f in (WEAKER, NOT_FROZEN))
    assert escape(f"Flagged: {reasons}: kept as evidence, not ranked.") in page
    assert "judged outside the bubblewrap sandbox its hardware profile requires" in page
    # The environment it points to names the jail that ran.
    assert escape("Bundle code's sandbox") in page
    assert "the network jail alone" in page


def test_a_gpu_profile_requires_the_sandbox_even_where_cpu_is_named(
    settings, alice, team, charlie, charlie_team, problems
):
    settings.PKB_RANK_WEAKER_SANDBOX = ("cpu",)
    weaker = {"sandbox": "namespaces", "candidate_frozen": False}
    on_cpu = record(team, alice, weaker)
    on_gpu = record(charlie_team, charlie, weaker, profile="h200x4")
    # Named by the operator: the development profile ranks what its host could give.
    assert on_cpu.results.get().flags == []
    assert ranked_teams("cpu") == [team.name]
    assert on_gpu.results.get().flags == [WEAKER, NOT_FROZEN]
    assert ranked_teams("h200x4") == []


def test_a_rerun_judged_without_the_sandbox_takes_the_result_off_the_boards(alice, team, problems):
    submission = record(team, alice, CONFINED)
    problem = problems["all-reduce"]
    assert ranked_teams() == [team.name]
    rerun = rerun_queue(submission=submission, problem=problem, reason="top entries")
    assert rerun is not None
    judge_rerun(rerun, passed("all-reduce", 2.0), environment={"sandbox": None})
    result = submission.results.get()
    assert result.run_count == 2
    assert result.flags == [WEAKER, NOT_FROZEN]
    assert ranked_teams() == [] and team.name not in on_problem_board(problem)
