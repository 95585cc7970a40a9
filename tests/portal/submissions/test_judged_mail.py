"""'Your submission is judged' mail: sent when a host's finished message is recorded, to
the team's members who gave an email, and never at the cost of the recording."""

from __future__ import annotations

import logging
import socket

import pytest
from django.core import mail

from evaluator.contract import EvaluationOutcome, ProblemStatus
from evaluator.contract import ProblemResult as Reported
from portal.submissions.models import Submission
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import finish, passed

pytestmark = pytest.mark.django_db


@pytest.fixture
def addresses(alice, bob, charlie):
    # alice gave an email at sign-up, bob did not; charlie, of another team, did.
    for user, email in ((alice, "alice@example.org"), (charlie, "charlie@example.org")):
        user.email = email
        user.save(update_fields=["email"])


@pytest.fixture
def submission(team, alice, problems):
    return SubmissionFactory(
        team=team, user=alice, running=True, problems=["all-reduce", "all-gather"]
    )


def _wrong(slug: str) -> Reported:
    return Reported(slug, ProblemStatus.WRONG_ANSWER, 4, message="rank 1: element 3")


def test_members_with_an_email_get_the_judged_mail_after_the_commit(
    submission, addresses, settings, django_capture_on_commit_callbacks
):
    settings.PKB_SITE_URL = "https://kernels.example.org"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert finish(submission.evaluation_id, passed("all-reduce", 1.84), _wrong("all-gather"))
    assert mail.outbox == []  # nothing before the results are committed
    for callback in callbacks:
        callback()
    [sent] = mail.outbox
    assert sent.to == ["alice@example.org"]
    assert sent.subject == f"Submission #{submission.pk} judged: 1 of 2 passed"
    assert "- all-reduce: Passed, 1.84x the reference" in sent.body
    assert "- all-gather: Wrong answer" in sent.body
    assert f"https://kernels.example.org/submissions/{submission.pk}/" in sent.body


def test_a_failed_evaluation_is_mailed_with_its_reason(
    submission, addresses, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        finish(
            submission.evaluation_id,
            outcome=EvaluationOutcome.FAILED,
            reason="CUDA code needs a GPU host",
        )
    [sent] = mail.outbox
    assert sent.subject == f"Submission #{submission.pk} failed"
    assert "could not be judged: CUDA code needs a GPU host" in sent.body
    assert "the platform's fault, not the bundle's: the run does not count against" in sent.body


def test_a_duplicate_finished_message_sends_nothing_more(
    submission, addresses, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        assert finish(submission.evaluation_id, passed("all-reduce"))
        assert not finish(submission.evaluation_id, passed("all-reduce"))
    assert len(mail.outbox) == 1


def test_a_team_without_addresses_gets_no_mail(submission, bob, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert finish(submission.evaluation_id, passed("all-reduce"))
    assert mail.outbox == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when this returns: nothing listens


def test_a_mail_server_that_refuses_never_fails_the_recording(
    submission, addresses, settings, caplog, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", _closed_port()
    settings.EMAIL_TIMEOUT = 2
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        assert finish(submission.evaluation_id, passed("all-reduce"))
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE
    assert submission.results.get().speedup == 1.5
    assert "the 'judged' mail was not sent" in caplog.text


def test_a_run_of_another_mode_says_so(
    team, alice, problems, addresses, django_capture_on_commit_callbacks
):
    benchmark = SubmissionFactory(team=team, user=alice, running=True, mode="benchmark")
    with django_capture_on_commit_callbacks(execute=True):
        finish(benchmark.evaluation_id, passed("all-reduce", 2.0))
    [sent] = mail.outbox
    assert sent.subject == f"Submission #{benchmark.pk} (benchmark run) judged: 1 of 1 passed"
    assert "(a benchmark run, for your team only: never ranked)" in sent.body
