"""A re-run for the ranking through real Celery workers on the real Redis: the evaluator
judges the same bundle again under a new evaluation id, and the result keeps both runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from portal.accounts.services import team_create
from portal.problems.models import Problem
from portal.problems.services import problems_sync
from portal.submissions.models import ProblemResult, Rerun, Submission
from portal.submissions.services import rerun_queue
from tests.evaluator.archives import make_zip
from tests.integration.test_end_to_end import _upload, _wait_until_finished

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "all-reduce.py"
DEADLINE_S = 300


def _wait_for_rerun(rerun: Rerun, logs: dict[str, Path]) -> Rerun:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        rerun.refresh_from_db()
        if rerun.status in (Rerun.Status.DONE, Rerun.Status.FAILED):
            return rerun
        time.sleep(0.5)
    worker_logs = "\n".join(f"--- {k}\n{v.read_text()[-3000:]}" for k, v in logs.items())
    pytest.fail(f"re-run {rerun.pk} still {rerun.status}\n{worker_logs}")


def test_a_rerun_is_judged_by_a_real_worker_and_kept_beside_the_first_run(client, workers):
    problems_sync()
    alice = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team_create(owner=alice, name="Alice's Kernels")
    bundle = make_zip({"all-reduce.py": EXAMPLE.read_text()})
    submission = _wait_until_finished(_upload(client, alice, bundle, "one.zip"), workers)
    assert submission.status == Submission.Status.DONE, submission.reason

    problem = Problem.objects.get(slug="all-reduce")
    rerun = rerun_queue(submission=submission, problem=problem, reason="for the ranking")
    assert rerun is not None
    rerun = _wait_for_rerun(rerun, workers)
    assert rerun.status == Rerun.Status.DONE, rerun.reason

    result = ProblemResult.objects.get(submission=submission, problem=problem)
    first, second = result.runs.all()
    assert first.evaluation_id == submission.evaluation_id
    assert second.evaluation_id == rerun.evaluation_id != submission.evaluation_id
    assert first.status == second.status == ProblemResult.Status.PASSED
    assert result.run_count == 2 and result.status == ProblemResult.Status.PASSED
    assert result.speedup == pytest.approx((first.speedup + second.speedup) / 2)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE and submission.attempts == 1
