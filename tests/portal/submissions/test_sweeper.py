from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluator.host import liveness
from portal.submissions import broker
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_start, submission_cancel, submissions_sweep
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits(settings, liveness_keys):
    settings.PKB_STUCK_AFTER_S = 600
    settings.PKB_HEARTBEAT_S = 10
    settings.PKB_MAX_ATTEMPTS = 3
    settings.PKB_NO_WORKER_WAIT_S = 3600


@pytest.fixture
def worker(liveness_keys):
    """A cpu worker that keeps announcing itself (as KeepMessagesVisible does)."""

    def announce(at):
        liveness.announce_worker(liveness_keys, profile="cpu", name="w@h", now=at.timestamp())

    return announce


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def queued(team, alice, **kwargs) -> Submission:
    """A queued submission whose request the broker holds."""
    submission = SubmissionFactory(team=team, user=alice, **kwargs)
    broker.mark_sent(str(submission.evaluation_id))
    return submission


def test_it_leaves_a_live_evaluation_alone(team, alice):
    SubmissionFactory(team=team, user=alice, running=True)
    report = submissions_sweep(now=later(599))
    assert report.requeued == report.failed == report.resent == []


def test_it_requeues_a_stuck_evaluation_and_stops_the_old_attempt(
    team, alice, sent, liveness_keys, django_capture_on_commit_callbacks
):
    stuck = SubmissionFactory(team=team, user=alice, running=True, host="gpu-7")
    old_id = stuck.evaluation_id
    with django_capture_on_commit_callbacks(execute=True):
        report = submissions_sweep(now=later(601))
    assert report.requeued == [stuck.pk] and report.resent == []
    stuck.refresh_from_db()
    assert stuck.status == Submission.Status.QUEUED
    assert stuck.attempts == 2 and stuck.evaluation_id != old_id
    assert "gpu-7" in stuck.reason
    assert [request.evaluation_id for request, _ in sent] == [str(stuck.evaluation_id)]
    # A host still running the old attempt (or taking a redelivered copy) stops.
    assert liveness_keys.get(liveness.stop_key(str(old_id))) == b"superseded by a new attempt"


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


def test_it_never_resends_a_submission_that_only_waits_in_a_long_queue(team, alice, sent, worker):
    waiting = [queued(team, alice) for _ in range(3)]
    for hours in (1, 5, 24):
        worker(later(hours * 3600))
        report = submissions_sweep(now=later(hours * 3600))
        assert report.resent == report.failed == [], hours
    assert sent == []
    assert {s.status for s in Submission.objects.filter(pk__in=[s.pk for s in waiting])} == {
        Submission.Status.QUEUED
    }


def test_it_resends_a_queued_submission_the_broker_lost(
    team, alice, sent, worker, liveness_keys, django_capture_on_commit_callbacks
):
    held = queued(team, alice)
    lost = queued(team, alice)
    liveness_keys.delete(liveness.sent_key(str(lost.evaluation_id)))  # as a restart does
    worker(later(0))
    with django_capture_on_commit_callbacks(execute=True):
        assert submissions_sweep(now=later(29)).resent == []  # 3 heartbeats of grace
        report = submissions_sweep(now=later(31))
    assert report.resent == [lost.pk]
    lost.refresh_from_db()
    assert lost.status == Submission.Status.QUEUED and lost.attempts == 1
    assert [request.evaluation_id for request, _ in sent] == [str(lost.evaluation_id)]
    assert held.pk not in report.resent


def test_it_resends_nothing_when_the_broker_cannot_say(team, alice, sent, settings):
    SubmissionFactory(team=team, user=alice)  # no marker: it would look lost
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    report = submissions_sweep(now=later(10**5))
    assert report.resent == report.failed == [] and sent == []


def test_it_fails_a_submission_no_worker_of_its_profile_could_take(team, alice):
    waiting = queued(team, alice)
    assert submissions_sweep(now=later(3599)).failed == []
    report = submissions_sweep(now=later(3601))
    assert report.failed == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.status == Submission.Status.FAILED
    assert waiting.reason.startswith("Waited 60 min for a cpu worker (CPU, 4 ranks over gloo)")


def test_a_worker_seen_while_it_waited_keeps_it_queued(team, alice, worker):
    waiting = queued(team, alice)
    worker(later(3000))  # the worker came and went: the wait counts from its last sign
    assert submissions_sweep(now=later(3601)).failed == []
    assert submissions_sweep(now=later(3000 + 3601)).failed == [waiting.pk]


def test_a_cancel_stops_the_host_within_its_next_poll(
    team, alice, liveness_keys, django_capture_on_commit_callbacks
):
    running = SubmissionFactory(team=team, user=alice, running=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_cancel(submission=running)
    assert liveness_keys.get(liveness.stop_key(str(running.evaluation_id))) == b"cancelled"


def test_finished_submissions_are_never_swept(team, alice):
    SubmissionFactory(team=team, user=alice, done=True)
    SubmissionFactory(team=team, user=alice, status=Submission.Status.CANCELLED)
    report = submissions_sweep(now=later(10**6))
    assert report.requeued == report.failed == report.resent == []


def test_a_silent_host_that_already_reported_is_left_to_be_recorded(team, alice, liveness_keys):
    # Its finished message waits in the broker (a portal worker died recording it): judging
    # the bundle again would be in vain.
    done = SubmissionFactory(team=team, user=alice, running=True)
    liveness_keys.set(liveness.reported_key(str(done.evaluation_id)), 1)
    assert submissions_sweep(now=later(601)).requeued == []
    done.refresh_from_db()
    assert done.status == Submission.Status.RUNNING and done.attempts == 1
