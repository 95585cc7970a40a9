from __future__ import annotations

import logging

import pytest
from django.db import OperationalError

from evaluator.contract import (
    FINISHED_TASK,
    PORTAL_QUEUE,
    PROGRESS_TASK,
    STARTED_TASK,
    EvaluationOutcome,
    ProblemResult,
    ProblemStatus,
    finished_message,
    progress_message,
    started_message,
)
from evaluator.host.liveness import DEFAULT_VISIBILITY_TIMEOUT_S as EVALUATOR_VISIBILITY_S
from portal import celery_app
from portal.submissions import tasks
from portal.submissions.models import Submission
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(alice, team, problems):
    return SubmissionFactory(team=team, user=alice, problems=["all-reduce"])


def test_the_tasks_are_registered_under_the_contract_names():
    celery_app.loader.import_default_modules()
    for name in (STARTED_TASK, PROGRESS_TASK, FINISHED_TASK, tasks.SWEEP_TASK):
        assert name in celery_app.tasks
        assert celery_app.amqp.router.route({}, name)["queue"].name == PORTAL_QUEUE


def test_the_celery_app_is_configured_for_json_and_heartbeats(settings):
    conf = celery_app.conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    # The visibility timeout is a few heartbeats (hosts renew it), the same as the hosts'.
    assert conf.broker_transport_options["visibility_timeout"] == EVALUATOR_VISIBILITY_S == 60
    assert conf.broker_transport_options["unacked_restore_throttle"] == 1
    assert conf.beat_schedule["sweep-submissions"]["task"] == tasks.SWEEP_TASK
    assert conf.beat_schedule["sweep-submissions"]["schedule"] == settings.PKB_SWEEP_INTERVAL_S


def test_the_defaults_queue_a_killed_hosts_work_again_within_two_minutes(settings):
    # The last heartbeat may come up to one interval before the kill; the sweeper notices
    # the silence PKB_STUCK_AFTER_S later, at its next run at the latest.
    worst = settings.PKB_HEARTBEAT_S + settings.PKB_STUCK_AFTER_S + settings.PKB_SWEEP_INTERVAL_S
    assert worst <= 120
    # The broker's own path is faster still: it hands the message out again after the
    # visibility timeout, restored within kombu's 5 s check.
    assert settings.PKB_HEARTBEAT_S + settings.PKB_VISIBILITY_TIMEOUT_S + 5 <= 120


def test_recording_tasks_are_acknowledged_late_and_given_back_if_their_worker_dies():
    celery_app.loader.import_default_modules()
    for name in (STARTED_TASK, PROGRESS_TASK, FINISHED_TASK):
        task = celery_app.tasks[name]
        assert task.acks_late and task.reject_on_worker_lost, name
        # A database outage is retried, not acknowledged and lost.
        assert OperationalError in task.autoretry_for and task.retry_backoff_max <= 30, name


def test_a_whole_evaluation_through_the_tasks(submission):
    eid = str(submission.evaluation_id)
    assert tasks.evaluation_started.apply(args=[started_message(evaluation_id=eid, host="h")]).get()
    progress = progress_message(evaluation_id=eid, done=0, total=1, current="all-reduce")
    assert tasks.evaluation_progressed.apply(args=[progress]).get()
    result = ProblemResult("all-reduce", ProblemStatus.PASSED, 4, speedup=1.2)
    message = finished_message(evaluation_id=eid, outcome=EvaluationOutcome.DONE, results=[result])
    assert tasks.evaluation_finished.apply(args=[message]).get()
    assert not tasks.evaluation_finished.apply(args=[message]).get()  # a duplicate
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE
    assert submission.results.get().speedup == 1.2


@pytest.mark.parametrize(
    "task,message",
    [
        (tasks.evaluation_started, {"version": 99, "evaluation_id": "x", "host": "h"}),
        (tasks.evaluation_started, {"version": 1, "host": "h"}),
        (tasks.evaluation_started, {"version": 1, "evaluation_id": "not-a-uuid", "host": "h"}),
        (tasks.evaluation_progressed, {"version": 1, "evaluation_id": "x", "done": 1}),
        (tasks.evaluation_finished, "not even an object"),
        (tasks.evaluation_finished, {"version": 1, "evaluation_id": "x", "outcome": "done"}),
    ],
)
def test_a_message_breaking_the_contract_is_logged_and_dropped(submission, caplog, task, message):
    with caplog.at_level(logging.ERROR, logger="portal.submissions.tasks"):
        outcome = task.apply(args=[message])
    assert outcome.successful() and outcome.get() is None
    assert "dropped" in caplog.text
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.QUEUED


def test_the_sweep_task_calls_the_sweeper(submission):
    assert tasks.sweep.apply().get() == {"requeued": [], "failed": [], "resent": []}
