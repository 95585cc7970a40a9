"""Retention: logs and unneeded bundles of old submissions go, results stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from portal.ops.retention import retention_apply
from portal.ops.tasks import RETENTION_TASK, retention
from portal.submissions.models import ProblemResult, Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

DAYS = 30


def _finished(team, *, days_ago: float, status=Submission.Status.DONE) -> Submission:
    at = timezone.now() - timedelta(days=days_ago)
    return SubmissionFactory(
        team=team, status=status, started_at=at - timedelta(minutes=5), finished_at=at
    )


def _stored(submission: Submission) -> bool:
    return submission.bundle.storage.exists(submission.bundle.name)


@pytest.fixture
def old_pass(team, problems) -> Submission:
    submission = _finished(team, days_ago=40)
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], log="rank 0 ok")
    return submission


def test_old_logs_are_cleared_and_their_results_kept(old_pass):
    report = retention_apply(days=DAYS)
    result = ProblemResult.objects.get(submission=old_pass)
    assert report.logs_cleared == 1
    assert result.log == ""
    assert (result.status, result.speedup, result.time_us) == ("passed", 1.5, 100.0)
    assert _stored(old_pass), "a bundle that passed ranks and may be judged again"


def test_bundles_nothing_needs_are_deleted_and_their_page_says_so(client, alice, team, problems):
    crashed = _finished(team, days_ago=40, status=Submission.Status.FAILED)
    superseded = _finished(team, days_ago=45)
    latest_try = _finished(team, days_ago=35)
    for submission in (superseded, latest_try):
        ProblemResultFactory(
            submission=submission, problem=problems["all-reduce"], status="wrong_answer"
        )

    report = retention_apply(days=DAYS)

    assert sorted(report.bundles_deleted) == sorted([crashed.pk, superseded.pk])
    assert not _stored(crashed) and not _stored(superseded)
    assert _stored(latest_try), "a team's best attempt is what a re-evaluation queues"
    assert Submission.objects.get(pk=crashed.pk).status == "failed"
    client.force_login(alice)
    assert client.get(reverse("submissions:bundle", args=[crashed.pk])).status_code == 404


def test_recent_and_active_submissions_keep_everything(team, problems):
    recent = _finished(team, days_ago=5, status=Submission.Status.FAILED)
    running = SubmissionFactory(team=team, running=True)
    ProblemResultFactory(submission=recent, problem=problems["all-reduce"], log="kept")

    assert retention_apply(days=DAYS).bundles_deleted == []
    assert _stored(recent) and _stored(running)
    assert ProblemResult.objects.get(submission=recent).log == "kept"


def test_zero_days_keeps_everything(team):
    old = _finished(team, days_ago=400, status=Submission.Status.FAILED)
    report = retention_apply(days=0)
    assert (report.logs_cleared, report.bundles_deleted) == (0, [])
    assert _stored(old)


def test_running_it_again_changes_nothing(old_pass, team):
    _finished(team, days_ago=40, status=Submission.Status.CANCELLED)
    first = retention_apply(days=DAYS)
    again = retention_apply(days=DAYS)
    assert first.logs_cleared == 1 and len(first.bundles_deleted) == 1
    assert (again.logs_cleared, again.bundles_deleted) == (0, [])


def test_the_beat_runs_it_with_the_setting(settings, team):
    schedule = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert RETENTION_TASK in schedule
    old = _finished(team, days_ago=10, status=Submission.Status.FAILED)

    settings.PKB_RETENTION_DAYS = 0
    assert retention.apply().get() == {"logs_cleared": 0, "bundles_deleted": []}
    settings.PKB_RETENTION_DAYS = 7
    assert retention.apply().get() == {"logs_cleared": 0, "bundles_deleted": [old.pk]}
