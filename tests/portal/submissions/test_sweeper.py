from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.submissions.models import Submission
from portal.submissions.services import evaluation_start, submissions_sweep
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits(settings):
    settings.PKB_STUCK_AFTER_S = 600
    settings.PKB_MAX_ATTEMPTS = 3


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def test_it_leaves_a_live_evaluation_alone(team, alice):
    SubmissionFactory(team=team, user=alice, running=True)
    report = submissions_sweep(now=later(599))
    assert report.requeued == report.failed == report.resent == []


def test_it_requeues_a_stuck_evaluation(team, alice, sent, django_capture_on_commit_callbacks):
    stuck = SubmissionFactory(team=team, user=alice, running=True, host="gpu-7")
    old_id = stuck.evaluation_id
    with django_capture_on_commit_callbacks(execute=True):
        report = submissions_sweep(now=later(601))
    assert report.requeued == [stuck.pk]
    stuck.refresh_from_db()
    assert stuck.status == Submission.Status.QUEUED
    assert stuck.attempts == 2 and stuck.evaluation_id != old_id
    assert "gpu-7" in stuck.reason
    assert [request.evaluation_id for request, _ in sent] == [str(stuck.evaluation_id)]


def test_it_fails_an_evaluation_stuck_too_often(team, alice):
    stuck = SubmissionFactory(team=team, user=alice, running=True, host="gpu-7")
    for attempt in (2, 3):
        submissions_sweep(now=later(601))
        stuck.refresh_from_db()
        assert stuck.attempts == attempt
        evaluation_start(evaluation_id=str(stuck.evaluation_id), host=f"gpu-{attempt}")
        Submission.objects.filter(pk=stuck.pk).update(heartbeat_at=timezone.now())
    report = submissions_sweep(now=later(601))
    assert report.failed == [stuck.pk]
    stuck.refresh_from_db()
    assert stuck.status == Submission.Status.FAILED
    assert stuck.reason == "evaluation stalled 3 times (last host gpu-3)"
    assert stuck.finished_at is not None


def test_it_resends_a_queued_submission_presumed_lost(
    team, alice, sent, django_capture_on_commit_callbacks
):
    waiting = SubmissionFactory(team=team, user=alice)
    with django_capture_on_commit_callbacks(execute=True):
        assert submissions_sweep(now=later(4 * 600 - 1)).resent == []
        report = submissions_sweep(now=later(4 * 600 + 1))
    assert report.resent == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.status == Submission.Status.QUEUED and waiting.attempts == 1
    assert [request.evaluation_id for request, _ in sent] == [str(waiting.evaluation_id)]


def test_finished_submissions_are_never_swept(team, alice):
    SubmissionFactory(team=team, user=alice, done=True)
    SubmissionFactory(team=team, user=alice, status=Submission.Status.CANCELLED)
    report = submissions_sweep(now=later(10**6))
    assert report.requeued == report.failed == report.resent == []
