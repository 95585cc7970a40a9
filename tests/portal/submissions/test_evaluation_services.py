from __future__ import annotations

import uuid

import pytest

from evaluator.contract import (
    CaseResult,
    ContractError,
    EvaluationOutcome,
    ProblemStatus,
    finished_message,
)
from evaluator.contract import ProblemResult as Reported
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import (
    evaluation_finish,
    evaluation_progress,
    evaluation_start,
    submission_cancel,
    submission_requeue,
)
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(alice, team, problems):
    return SubmissionFactory(team=team, user=alice, problems=["all-gather", "all-reduce"])


def finished(submission, outcome=EvaluationOutcome.DONE, **kwargs):
    results = kwargs.pop("results", None)
    if results is None:
        results = [
            Reported(
                "all-reduce",
                ProblemStatus.PASSED,
                4,
                time_us=80.0,
                ref_time_us=120.0,
                speedup=1.5,
                cases=[CaseResult("dev-tiny", "float32", True, time_us=80.0)],
            ),
            Reported(
                "all-gather",
                ProblemStatus.WRONG_ANSWER,
                4,
                message="rank 2: element 17",
                max_abs_err=0.5,
                max_rel_err=float("inf"),
                log="Traceback...",
            ),
        ]
    return finished_message(
        evaluation_id=str(submission.evaluation_id), outcome=outcome, results=results, **kwargs
    )


def test_start_moves_queued_to_running(submission):
    assert evaluation_start(evaluation_id=str(submission.evaluation_id), host="h1")
    submission.refresh_from_db()
    assert submission.status == Submission.Status.RUNNING
    assert submission.host == "h1"
    assert submission.started_at is not None and submission.heartbeat_at is not None


def test_a_redelivered_start_is_harmless(submission):
    eid = str(submission.evaluation_id)
    assert evaluation_start(evaluation_id=eid, host="h1")
    first = Submission.objects.get(pk=submission.pk)
    assert evaluation_start(evaluation_id=eid, host="h1")
    again = Submission.objects.get(pk=submission.pk)
    assert again.status == Submission.Status.RUNNING
    assert again.started_at == first.started_at
    assert again.heartbeat_at >= first.heartbeat_at


def test_start_of_a_finished_or_unknown_attempt_is_refused(submission):
    eid = str(submission.evaluation_id)
    evaluation_start(evaluation_id=eid, host="h1")
    assert evaluation_finish(message=finished(submission))
    assert not evaluation_start(evaluation_id=eid, host="h2")
    assert not evaluation_start(evaluation_id=str(uuid.uuid4()), host="h2")
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.DONE


def test_start_rejects_a_malformed_id(submission):
    with pytest.raises(ContractError, match="not a UUID"):
        evaluation_start(evaluation_id="42", host="h1")


def test_progress_is_recorded_and_is_a_heartbeat(submission):
    eid = str(submission.evaluation_id)
    evaluation_start(evaluation_id=eid, host="h1")
    assert evaluation_progress(evaluation_id=eid, done=1, total=2, current="all-reduce")
    submission.refresh_from_db()
    assert (submission.progress_done, submission.progress_total) == (1, 2)
    assert submission.current_problem == "all-reduce"


def test_progress_before_the_start_message_starts_it(submission):
    eid = str(submission.evaluation_id)
    assert evaluation_progress(evaluation_id=eid, done=0, total=2, current="all-gather")
    submission.refresh_from_db()
    assert submission.status == Submission.Status.RUNNING and submission.started_at


@pytest.mark.parametrize("done", [-1, "3", None, True])
def test_progress_rejects_bad_counts(submission, done):
    with pytest.raises(ContractError):
        evaluation_progress(
            evaluation_id=str(submission.evaluation_id), done=done, total=2, current="x"
        )


def test_finish_writes_every_result_with_the_status(submission):
    evaluation_start(evaluation_id=str(submission.evaluation_id), host="h1")
    message = finished(submission, environment={"torch": "2.13", "world_size": 4})
    assert evaluation_finish(message=message)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE
    assert submission.finished_at is not None
    assert submission.environment == {"torch": "2.13", "world_size": 4}
    results = {r.problem.slug: r for r in submission.results.select_related("problem")}
    assert results["all-reduce"].status == ProblemResult.Status.PASSED
    assert results["all-reduce"].speedup == 1.5
    assert results["all-reduce"].cases[0]["case"] == "dev-tiny"
    wrong = results["all-gather"]
    assert (wrong.status, wrong.message) == ("wrong_answer", "rank 2: element 17")
    assert (wrong.max_abs_err, wrong.max_rel_err) == (0.5, float("inf"))
    assert wrong.log == "Traceback..."


def test_a_duplicate_finished_message_is_a_no_op(submission):
    message = finished(submission)
    assert evaluation_finish(message=message)
    assert not evaluation_finish(message=message)
    assert ProblemResult.objects.filter(submission=submission).count() == 2


def test_a_message_of_an_old_attempt_is_dropped(submission):
    old = finished(submission)
    assert submission_requeue(submission=submission, reason="host lost")
    assert not evaluation_finish(message=old)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.QUEUED
    assert not submission.results.exists()


def test_a_failed_evaluation_keeps_its_reason(submission):
    message = finished(
        submission, EvaluationOutcome.FAILED, results=[], reason="CUDA code needs a GPU host"
    )
    assert evaluation_finish(message=message)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.FAILED
    assert submission.reason == "CUDA code needs a GPU host"


def test_results_for_problems_outside_the_bundle_are_ignored(submission):
    stray = Reported("tp-linear", ProblemStatus.PASSED, 4, speedup=9.0)
    ok = Reported("all-reduce", ProblemStatus.PASSED, 4, speedup=1.1)
    assert evaluation_finish(message=finished(submission, results=[stray, ok, ok]))
    assert list(submission.results.values_list("problem__slug", flat=True)) == ["all-reduce"]


def test_non_finite_timings_are_not_stored(submission):
    odd = Reported(
        "all-reduce",
        ProblemStatus.PASSED,
        4,
        speedup=float("nan"),
        time_us=float("inf"),
        max_abs_err=float("nan"),
    )
    assert evaluation_finish(message=finished(submission, results=[odd]))
    result = submission.results.get()
    assert (result.speedup, result.time_us, result.max_abs_err) == (None, None, None)


def test_finish_rejects_an_unknown_outcome(submission):
    message = finished(submission)
    message["outcome"] = "exploded"
    with pytest.raises(ContractError, match="unknown outcome"):
        evaluation_finish(message=message)
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.QUEUED


def test_finish_rejects_a_bad_result_without_writing_anything(submission):
    message = finished(submission)
    message["results"][0]["status"] = "sort of passed"
    with pytest.raises(ContractError):
        evaluation_finish(message=message)
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.QUEUED


def test_requeue_starts_a_new_attempt_and_enqueues_on_commit(
    submission, sent, django_capture_on_commit_callbacks
):
    old_id = submission.evaluation_id
    evaluation_finish(message=finished(submission))
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_requeue(submission=submission, reason="rerun")
    submission.refresh_from_db()
    assert submission.evaluation_id != old_id
    assert submission.attempts == 2
    assert submission.status == Submission.Status.QUEUED
    assert submission.finished_at is None and not submission.results.exists()
    [(request, queue)] = sent
    assert request.evaluation_id == str(submission.evaluation_id)
    assert request.bundle() == submission.bundle.read()
    assert queue == "eval.cpu"


def test_requeue_of_a_stale_copy_does_nothing(submission, sent):
    stale = Submission.objects.get(pk=submission.pk)
    assert submission_requeue(submission=submission, reason="first")
    assert not submission_requeue(submission=stale, reason="second")
    assert Submission.objects.get(pk=submission.pk).attempts == 2


def test_cancel_stops_an_active_submission_and_drops_later_results(submission):
    assert submission_cancel(submission=submission, reason="withdrawn")
    submission.refresh_from_db()
    assert (submission.status, submission.reason) == ("cancelled", "withdrawn")
    assert not evaluation_finish(message=finished(submission))
    assert not submission_cancel(submission=submission)


# --- roofline and flags -------------------------------------------------------------------


def test_finish_records_the_roofline_and_the_flags(submission):
    fast = Reported(
        "all-reduce",
        ProblemStatus.PASSED,
        4,
        time_us=10.0,
        speedup=12.0,
        roofline=1.4,
        flags=["below_floor"],
        cases=[CaseResult("eval-1", "bfloat16", True, time_us=10.0, floor_us=14.0, roofline=1.4)],
    )
    slow = Reported("all-gather", ProblemStatus.PASSED, 4, speedup=1.1, roofline=0.62)
    assert evaluation_finish(message=finished(submission, results=[fast, slow]))
    results = {r.problem.slug: r for r in submission.results.select_related("problem")}
    flagged = results["all-reduce"]
    assert (flagged.roofline, flagged.flags) == (1.4, ["below_floor"])
    assert flagged.is_flagged
    assert (flagged.cases[0]["floor_us"], flagged.cases[0]["roofline"]) == (14.0, 1.4)
    assert (results["all-gather"].roofline, results["all-gather"].flags) == (0.62, [])
    assert not results["all-gather"].is_flagged


def test_a_result_without_a_roofline_keeps_none(submission):
    assert evaluation_finish(message=finished(submission))
    result = submission.results.get(problem__slug="all-reduce")
    assert (result.roofline, result.flags) == (None, [])


def test_an_unknown_flag_is_kept_and_still_flags_the_result(submission):
    odd = Reported("all-reduce", ProblemStatus.PASSED, 4, speedup=2.0, flags=["from_the_future"])
    assert evaluation_finish(message=finished(submission, results=[odd]))
    result = submission.results.get()
    assert result.flags == ["from_the_future"] and result.is_flagged
    assert result.flag_reasons == ["from_the_future"]


def test_finish_rejects_flags_that_are_not_a_list_of_strings(submission):
    message = finished(submission)
    message["results"][0]["flags"] = "below_floor"
    with pytest.raises(ContractError, match="flags"):
        evaluation_finish(message=message)
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.QUEUED
    assert not submission.results.exists()


def test_non_finite_case_values_are_stored_as_none(submission):
    # jsonb refuses NaN and Infinity: one of them must not lose the whole message.
    case = CaseResult("eval-1", "float32", False, max_rel_err=float("inf"), roofline=float("nan"))
    wrong = Reported(
        "all-reduce", ProblemStatus.WRONG_ANSWER, 4, max_rel_err=float("inf"), cases=[case]
    )
    assert evaluation_finish(message=finished(submission, results=[wrong]))
    result = submission.results.get()
    assert result.max_rel_err == float("inf")
    assert (result.cases[0]["max_rel_err"], result.cases[0]["roofline"]) == (None, None)
