"""Issue 45: results under review. A host reports the precheck's findings with each
result (the contract's `review`); the portal keeps such a result off every board until an
admin clears it (logged, with who and when), and the team reads the findings on its
submission's page from the upload on."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from evaluator.contract import EvaluationOutcome, finished_message
from portal.leaderboard.selectors import leaderboard_rows, problem_board
from portal.submissions import tasks
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import evaluation_start, submission_create
from portal.submissions.services.review import result_review_clear
from tests.portal.bundles import upload, zip_bundle
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import CONFINED, passed

pytestmark = pytest.mark.django_db

FINDING = {"rule": "clock", "path": "all-reduce.py", "line": 1, "text": "reads a clock: time"}
UNDER_REVIEW = ProblemResult.Flag.UNDER_REVIEW.value
CHANGELIST = reverse("admin:submissions_submission_changelist")


def record(team, user, *, speedup: float, review: list) -> Submission:
    """A ranked submission whose finished message goes through the portal's task."""
    submission = SubmissionFactory(team=team, user=user, problems=["all-reduce"])
    eid = str(submission.evaluation_id)
    assert evaluation_start(evaluation_id=eid, host="cpu-host")
    result = passed("all-reduce", speedup)
    result.review = review
    message = finished_message(
        evaluation_id=eid, outcome=EvaluationOutcome.DONE, results=[result], environment=CONFINED
    )
    assert tasks.evaluation_finished(json.loads(json.dumps(message))) is True
    submission.refresh_from_db()
    return submission


def ranked_teams() -> list[str]:
    return [r.team_name for r in leaderboard_rows(profile="cpu") if not r.is_baseline]


def test_a_result_under_review_ranks_only_once_cleared(
    alice, team, charlie, charlie_team, admin, problems
):
    record(charlie_team, charlie, speedup=1.5, review=[])
    flagged = record(team, alice, speedup=3.0, review=[FINDING])
    result = flagged.results.get()
    assert result.flags == [UNDER_REVIEW] and result.review == [FINDING]
    assert result.runs.get().flags == [UNDER_REVIEW]
    assert ranked_teams() == [charlie_team.name]
    board = problem_board(problem=problems["all-reduce"], profile="cpu")
    assert team.name not in [r.team_name for r in board.ranking]

    assert result_review_clear(result=result, by=admin) is True
    assert result.flags == [] and result.review == [FINDING]  # the findings stay, read
    assert result.review_cleared_by == admin and result.review_cleared_at is not None
    assert result.runs.get().flags == []
    assert ranked_teams() == [team.name, charlie_team.name]
    assert result_review_clear(result=result, by=admin) is False  # nothing left to clear


def test_other_flags_stay_when_the_review_is_cleared(alice, team, admin, problems):
    result = record(team, alice, speedup=2.0, review=[FINDING]).results.get()
    ProblemResult.objects.filter(pk=result.pk).update(flags=["below_floor", UNDER_REVIEW])
    assert result_review_clear(result=result, by=admin)
    assert result.flags == ["below_floor"] and ranked_teams() == []


def test_the_admin_clears_a_submissions_review_with_a_log(client, admin, alice, team, problems):
    submission = record(team, alice, speedup=2.0, review=[FINDING])
    client.force_login(admin)
    response = client.post(
        CHANGELIST, {"action": "clear_review", "_selected_action": [submission.pk]}
    )
    assert response.status_code == 302
    result = submission.results.get()
    assert result.flags == [] and result.review_cleared_by == admin
    log = LogEntry.objects.get(object_id=str(submission.pk))
    assert log.user == admin and log.change_message == f"Review cleared by {admin}: 1 result(s)."
    assert ranked_teams() == [team.name]


def test_the_team_sees_the_findings_and_the_state_on_its_page(client, alice, team, admin, problems):
    submission = record(team, alice, speedup=2.0, review=[FINDING])
    client.force_login(alice)
    url = reverse("submissions:detail", args=[submission.pk])
    page = client.get(url).content.decode()
    assert "clock at <code>all-reduce.py:1</code>: reads a clock: time" in page
    assert "under review: its code holds patterns that hostile bundles use" in page
    result_review_clear(result=submission.results.get(), by=admin)
    page = client.get(url).content.decode()
    assert "Review cleared" in page and "Flagged" not in page


def test_an_upload_is_prechecked_at_once(client, alice, team, problems):
    source = "import time\n\ndef solution(x):\n    return x.clone()\n"
    data = zip_bundle({"all-reduce.py": source})
    submission = submission_create(user=alice, upload=upload(data, "mine.zip"))
    assert [(f["rule"], f["path"], f["line"]) for f in submission.precheck["all-reduce"]] == [
        ("clock", "all-reduce.py", 1)
    ]
    client.force_login(alice)
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert 'id="precheck"' in page and "clock at <code>all-reduce.py:1</code>" in page


def test_an_honest_upload_has_no_findings(alice, team, problems):
    source = "def solution(x):\n    return x.clone()\n"
    data = zip_bundle({"all-reduce.py": source})
    submission = submission_create(user=alice, upload=upload(data, "mine.zip"))
    assert submission.precheck == {}
