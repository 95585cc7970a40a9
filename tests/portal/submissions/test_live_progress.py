"""Live progress: the compile pass and each problem's result as its host reports it, on the
submission's page while the evaluation runs; never on a board before the evaluation is
recorded. Messages go through the portal's Celery tasks, as hosts send them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evaluator.contract import (
    EvaluationOutcome,
    Phase,
    ProblemStatus,
    finished_message,
    progress_message,
)
from evaluator.contract import ProblemResult as Reported
from portal.leaderboard.selectors import leaderboard_rows
from portal.submissions import tasks
from portal.submissions.models import ProvisionalResult, Submission
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import passed

pytestmark = pytest.mark.django_db

SLUGS = ["all-reduce", "all-gather", "tp-linear"]


@pytest.fixture
def running(team, alice, problems):
    return SubmissionFactory(team=team, user=alice, running=True, problems=SLUGS)


def progress(submission, done: int, current: str, **fields) -> bool:
    message = progress_message(
        evaluation_id=str(submission.evaluation_id),
        done=done,
        total=len(SLUGS),
        current=current,
        **fields,
    )
    return tasks.evaluation_progressed.apply(args=[message]).get()


def status_panel(client, submission) -> str:
    response = client.get(reverse("submissions:status", args=[submission.pk]))
    assert response.status_code == 200
    return response.content.decode()


def row(html: str, slug: str) -> str:
    start = html.index(f'href="/problems/{slug}/"')
    return html[start : html.index("</tr>", start)]


def test_the_compile_pass_shows_as_compiling(client, alice, running):
    assert progress(running, 0, "", phase=Phase.COMPILING)
    client.force_login(alice)
    html = status_panel(client, running)
    assert "compiling: each of the 3 solutions is imported once" in html
    assert "0 / 3" not in html
    assert '<span class="badge pending">compiling</span>' in row(html, "all-reduce")
    assert ">Compiling</span>" in html  # the big badge too, not "Running"


def test_each_row_fills_in_as_its_result_arrives(client, alice, running):
    assert progress(running, 0, "all-reduce", phase=Phase.JUDGING)
    assert progress(running, 1, "all-gather", phase=Phase.JUDGING, result=passed("all-reduce", 1.8))
    client.force_login(alice)
    html = status_panel(client, running)
    assert "1 / 3 problems judged, now: <strong>all-gather</strong>" in html
    judged = row(html, "all-reduce")
    assert '<span class="badge passed">Passed</span>' in judged
    assert "judged, not yet recorded" in judged and "1.80" in judged
    assert '<span class="badge pending">running</span>' in row(html, "all-gather")
    assert '<span class="badge pending">pending</span>' in row(html, "tp-linear")


def test_every_problem_judged_says_the_results_are_being_recorded(client, alice, running):
    for done, slug in enumerate(SLUGS, start=1):
        assert progress(running, done, "", result=passed(slug, 1.5))
    client.force_login(alice)
    html = status_panel(client, running)
    assert "3 / 3 problems judged; recording the results" in html
    assert html.count("judged, not yet recorded") == 3
    assert "pending" not in html


def test_a_provisional_result_never_counts_on_a_board(running, problems):
    assert progress(running, 1, "all-gather", result=passed("all-reduce", 3.0))
    assert ProvisionalResult.objects.filter(submission=running).count() == 1
    assert [r for r in leaderboard_rows(profile="cpu") if not r.is_baseline] == []


def test_the_finished_results_replace_the_provisional_ones(client, alice, running):
    assert progress(running, 1, "all-gather", result=passed("all-reduce", 3.0))
    results = [passed(slug, 2.0) for slug in SLUGS]
    message = finished_message(
        evaluation_id=str(running.evaluation_id), outcome=EvaluationOutcome.DONE, results=results
    )
    assert tasks.evaluation_finished.apply(args=[message]).get()
    assert not ProvisionalResult.objects.filter(submission=running).exists()
    client.force_login(alice)
    html = status_panel(client, running)
    assert "judged, not yet recorded" not in html and "3.00" not in row(html, "all-reduce")
    team = [r.team_name for r in leaderboard_rows(profile="cpu") if not r.is_baseline]
    assert team == [running.team.name]
    # A progress message overtaken by the finish keeps nothing.
    assert not progress(running, 1, "all-gather", result=passed("all-reduce", 3.0))
    assert not ProvisionalResult.objects.exists()


def test_a_requeued_attempt_shows_only_its_own_results(client, alice, running):
    assert progress(running, 1, "all-gather", result=passed("all-reduce", 3.0))
    old = str(running.evaluation_id)
    Submission.objects.filter(pk=running.pk).update(
        evaluation_id="00000000-0000-4000-8000-000000000001",
        status=Submission.Status.QUEUED,
        attempts=2,
    )
    running.refresh_from_db()
    client.force_login(alice)
    assert "judged, not yet recorded" not in status_panel(client, running)
    assert str(running.evaluation_id) != old


def test_a_host_without_live_progress_is_read_as_before(client, alice, running):
    """Hosts of before: no phase, no result (contract version 1 all the same)."""
    message = {
        "version": 1,
        "evaluation_id": str(running.evaluation_id),
        "done": 1,
        "total": 3,
        "current": "all-gather",
    }
    assert tasks.evaluation_progressed.apply(args=[message]).get()
    running.refresh_from_db()
    assert (running.progress_done, running.progress_phase) == (1, "")
    client.force_login(alice)
    assert "1 / 3 problems judged" in status_panel(client, running)


def test_a_malformed_result_is_dropped_and_the_progress_kept(running):
    broken = {"slug": "all-reduce", "status": "exploded", "world_size": 4}
    message = progress_message(
        evaluation_id=str(running.evaluation_id), done=1, total=3, current="all-gather"
    )
    assert tasks.evaluation_progressed.apply(args=[{**message, "result": broken}]).get()
    running.refresh_from_db()
    assert running.progress_done == 1 and not ProvisionalResult.objects.exists()


def test_a_result_for_a_problem_the_bundle_lacks_is_ignored(running):
    stray = Reported("secret-op", ProblemStatus.PASSED, 4, speedup=9.0)
    assert progress(running, 1, "all-gather", result=stray)
    assert not ProvisionalResult.objects.exists()


def test_another_team_sees_no_provisional_result(client, charlie, running):
    assert progress(running, 1, "all-gather", result=passed("all-reduce", 3.0))
    client.force_login(charlie)
    assert client.get(reverse("submissions:status", args=[running.pk])).status_code == 404
