"""A run that failed through the platform's fault (its host lost again and again, no
worker, the evaluator's own error) is marked so, says so and costs no quota (issue 26)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluator.contract import (
    FAULT_SANDBOX,
    SANDBOX_FAULT,
    EvaluationOutcome,
    ProblemStatus,
    finished_message,
)
from evaluator.contract import ProblemResult as Reported
from portal.submissions.models import Submission
from portal.submissions.quotas import team_submission_quota
from portal.submissions.services import evaluation_finish, submissions_sweep
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import finish

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def limits(settings, liveness_keys):
    settings.PKB_SUBMISSIONS_PER_DAY = 1
    settings.PKB_STUCK_AFTER_S = 600
    settings.PKB_MAX_ATTEMPTS = 2
    settings.PKB_NO_WORKER_WAIT_S = 3600


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def assert_free(submission: Submission) -> None:
    submission.refresh_from_db()
    assert submission.status == Submission.Status.FAILED and submission.platform_fault
    assert team_submission_quota(submission.team).refusal("ranked") is None


def test_the_evaluators_own_failure_costs_no_quota(team, alice):
    submission = SubmissionFactory(team=team, user=alice, running=True)
    reason = "the evaluator failed: RuntimeError: NCCL error"
    assert finish(submission.evaluation_id, outcome=EvaluationOutcome.FAILED, reason=reason)
    assert_free(submission)


def test_a_host_lost_on_every_attempt_costs_no_quota(team, alice):
    submission = SubmissionFactory(team=team, user=alice, running=True, attempts=2)
    assert submissions_sweep(now=later(601)).failed == [submission.pk]
    assert_free(submission)


def test_a_profile_without_a_worker_costs_no_quota(team, alice):
    submission = SubmissionFactory(team=team, user=alice)
    Submission.objects.filter(pk=submission.pk).update(queued_at=later(-3601))
    assert submissions_sweep().failed == [submission.pk]
    assert_free(submission)


def test_the_bundles_own_failures_count(team, alice):
    submission = SubmissionFactory(team=team, user=alice, running=True)
    crashed = Reported("all-reduce", ProblemStatus.RUNTIME_ERROR, 4, message="boom")
    assert finish(submission.evaluation_id, crashed)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE and not submission.platform_fault
    assert "used 1 of 1 ranked runs" in team_submission_quota(team).refusal("ranked")


def test_its_page_and_the_api_say_so(client, team, alice):
    submission = SubmissionFactory(team=team, user=alice, running=True)
    assert finish(submission.evaluation_id, outcome=EvaluationOutcome.FAILED, reason="x")
    client.force_login(alice)
    body = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert 'id="platform-fault"' in body
    assert "not the bundle's: it does not count against the team's quota" in body
    api = client.get(reverse("api:submission", args=[submission.pk])).json()
    assert api["platform_fault"] is True


SANDBOX_REASON = (
    "the evaluator failed: bundle code cannot be confined: "
    f"{SANDBOX_FAULT} (bubblewrap): bwrap did not start"
)


def sandbox_fault(evaluation_id, *, fault=FAULT_SANDBOX, reason=SANDBOX_REASON) -> bool:
    """The finished message of a host whose sandbox could not start, as run.py sends it."""
    message = finished_message(
        evaluation_id=str(evaluation_id),
        outcome=EvaluationOutcome.FAILED,
        reason=reason,
        fault=fault,
    )
    return evaluation_finish(message=message)


def test_a_host_whose_sandbox_cannot_start_sends_the_bundle_to_another_worker(team, alice):
    """Issue 50: not charged, retried elsewhere; the old attempt's messages drop."""
    submission = SubmissionFactory(team=team, user=alice, running=True, host="gpu-7")
    old = submission.evaluation_id
    assert sandbox_fault(old)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.QUEUED and submission.attempts == 2
    assert submission.evaluation_id != old and not submission.platform_fault
    assert "sandbox could not start (gpu-7); queued again" in submission.reason
    assert not sandbox_fault(old)


def test_a_sandbox_fault_on_the_last_attempt_fails_free(team, alice):
    submission = SubmissionFactory(team=team, user=alice, running=True, attempts=2)
    assert sandbox_fault(submission.evaluation_id)
    assert_free(submission)
    assert SANDBOX_FAULT in submission.reason


@pytest.mark.parametrize("reason", ["x", SANDBOX_REASON])
def test_only_the_messages_fault_field_retries(team, alice, reason):
    """Other platform faults (the evaluator's own error would meet every host alike), and a
    reason that merely says the words (text a bundle may have put there), are recorded."""
    submission = SubmissionFactory(team=team, user=alice, running=True)
    assert sandbox_fault(submission.evaluation_id, fault="", reason=reason)
    assert_free(submission)
