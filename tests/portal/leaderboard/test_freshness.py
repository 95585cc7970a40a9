"""Memoised boards follow every change of their data, whoever writes it and however."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from portal.accounts.models import Team
from portal.leaderboard import freshness
from portal.leaderboard.selectors import leaderboard_rows
from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = pytest.mark.django_db


def names() -> list[str]:
    return [r.team_name for r in leaderboard_rows(profile="cpu") if not r.is_baseline]


@pytest.fixture
def ring(problems):
    team = TeamFactory(name="Ring")
    submission = submit(team, {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"]  # memoised from here on
    return submission


def test_a_new_result_recorded_in_bulk_shows(ring, problems):
    other = SubmissionFactory(team=TeamFactory(name="Gather"), done=True)
    ProblemResult.objects.bulk_create(
        [
            ProblemResult(
                submission=other, problem=problems["all-gather"], status="passed", speedup=3.0
            )
        ]
    )
    assert names() == ["Gather", "Ring"]  # faster


def test_a_disqualified_submission_leaves_at_once(ring):
    Submission.objects.filter(pk=ring.pk).update(disqualified_at=timezone.now())
    assert names() == []


def test_a_disqualified_team_leaves_at_once(ring):
    Team.objects.filter(pk=ring.team_id).update(disqualified_at=timezone.now())
    assert names() == []


def test_a_cancelled_submission_leaves_at_once(ring):
    Submission.objects.filter(pk=ring.pk).update(status=Submission.Status.CANCELLED)
    assert names() == []


def test_a_hidden_problem_or_a_new_weight_shows_at_once(ring, problems):
    Problem.objects.filter(slug="all-reduce").update(weight=5.0)
    [row] = [r for r in leaderboard_rows(profile="cpu") if not r.is_baseline]
    assert row.score.fast_1 == pytest.approx(5 / 7)
    Problem.objects.filter(slug="all-reduce").update(status=Problem.Status.HIDDEN)
    assert names() == []


def test_a_renamed_team_shows_at_once(ring):
    Team.objects.filter(pk=ring.team_id).update(name="Ring Masters")
    assert names() == ["Ring Masters"]


def test_a_deleted_result_leaves_at_once(ring):
    ProblemResult.objects.filter(submission=ring).delete()
    assert names() == []


def test_heartbeats_and_progress_keep_the_memo(ring):
    running = SubmissionFactory(running=True)
    before = freshness.data_version()
    Submission.objects.filter(pk=running.pk).update(
        heartbeat_at=timezone.now(), progress_done=1, progress_total=3, current_problem="all-reduce"
    )
    if connection.vendor == "postgresql":  # SQLite counts every update of a submission
        assert freshness.data_version() == before
    ProblemResultFactory(submission=running, problem=ring.results.first().problem)
    assert freshness.data_version() != before


def test_a_rolled_back_change_leaves_no_version_to_reuse(ring):
    # Every test's writes are rolled back: the next test must not find this test's boards
    # under a version its own writes lead to again.
    before = freshness.data_version()
    try:
        with transaction.atomic():
            TeamFactory(name="Gone")
            inside = freshness.data_version()
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    TeamFactory(name="Another")
    assert len({before, inside, freshness.data_version()}) == 3


def test_boards_expire_even_without_a_change(ring, monkeypatch):
    ProblemResult.objects.filter(submission=ring).update(speedup=3.0)
    assert leaderboard_rows(profile="cpu")[0].score.geomean == pytest.approx(3.0)
    assert leaderboard_rows(profile="cpu") is leaderboard_rows(profile="cpu")  # memoised
    monkeypatch.setattr(freshness, "MAX_AGE_S", 0.0)
    first = leaderboard_rows(profile="cpu")
    assert leaderboard_rows(profile="cpu") is not first
