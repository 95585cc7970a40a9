"""Speedup intervals and judged runs: what a host reports is kept per run, re-runs for the
ranking add runs beside the earlier ones, and the result holds their medians."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluator.contract import (
    CaseResult,
    EvaluationOutcome,
    ProblemStatus,
    ResultFlag,
    finished_message,
)
from evaluator.contract import ProblemResult as Reported
from evaluator.host import liveness
from evaluator.judge.seeds import trial_seed
from portal.leaderboard.selectors import problem_board
from portal.submissions.models import ProblemResult, Rerun, ResultRun, Submission
from portal.submissions.services import (
    evaluation_finish,
    evaluation_progress,
    rerun_queue,
    reruns_sweep,
    submission_requeue,
)
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import finish, judge_rerun, passed

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged(alice, team, problems) -> Submission:
    """alice's submission, judged once on all-reduce: 1.5x (1.45–1.55) in 80 us."""
    submission = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    assert finish(submission.evaluation_id, passed())
    submission.refresh_from_db()
    return submission


def rerun_of(submission, problems, **kwargs) -> Rerun:
    rerun = rerun_queue(
        submission=submission, problem=problems["all-reduce"], reason="for the ranking", **kwargs
    )
    assert rerun is not None
    return rerun


def judge_again(submission, problems, result: Reported) -> Rerun:
    rerun = rerun_of(submission, problems)
    judge_rerun(rerun, result)
    return rerun


# the interval


def test_the_interval_is_stored_per_problem_and_per_case(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    rounds = [
        {"reference_us": 120.0, "candidate_us": 80.0},
        {"reference_us": 118.0, "candidate_us": 81.0},
    ]
    case = CaseResult(
        "eval-1m",
        "bfloat16",
        True,
        time_us=80.0,
        speedup=1.48,
        speedup_low=1.44,
        speedup_high=1.51,
        rounds=rounds,
    )
    assert finish(submission.evaluation_id, passed(cases=[case]))
    result = ProblemResult.objects.get(submission=submission)
    assert (result.speedup, result.speedup_low, result.speedup_high) == (1.5, 1.45, 1.55)
    row = result.cases[0]
    assert (row["speedup"], row["speedup_low"], row["speedup_high"]) == (1.48, 1.44, 1.51)
    assert row["rounds"] == rounds


def test_a_result_without_an_interval_keeps_a_plain_speedup(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    assert finish(submission.evaluation_id, passed(low=None, high=None))
    result = ProblemResult.objects.get(submission=submission)
    assert result.speedup == 1.5 and result.speedup_low is None and result.speedup_high is None


@pytest.mark.parametrize(
    ("low", "high"), [(1.6, 1.7), (1.1, 1.4), (float("nan"), 1.7), (1.2, None), (None, 1.7)]
)
def test_an_interval_that_does_not_hold_its_speedup_is_dropped_and_flagged(
    alice, team, problems, low, high
):
    """A host's fault, not a team's: the result is kept, but its point speedup (1.5x) must
    not count in place of the interval (it would count as faster than the reference)."""
    submission = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    assert finish(submission.evaluation_id, passed(low=low, high=high))
    result = ProblemResult.objects.get(submission=submission)
    assert result.speedup == 1.5 and result.speedup_low is None and result.speedup_high is None
    assert result.flags == ["bad_interval"] and result.is_flagged
    assert "does not hold the speedup" in result.flag_reasons[0]
    assert problem_board(problem=problems["all-reduce"], profile="cpu").ranking == []


def test_an_old_hosts_message_without_the_fields_still_records(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[passed(low=None, high=None)],
    )
    for row in message["results"]:
        del row["speedup_low"], row["speedup_high"]
        for case in row["cases"]:
            del case["rounds"]
    assert evaluation_finish(message=message)
    assert ProblemResult.objects.get(submission=submission).speedup_low is None


# the first run


def test_the_submissions_evaluation_is_the_results_first_run(judged):
    result = judged.results.get()
    run = result.runs.get()
    assert run.evaluation_id == judged.evaluation_id
    assert run.judged_at == judged.finished_at and run.host == "gpu-host-1"
    assert (run.speedup, run.speedup_low, run.speedup_high, run.time_us) == (1.5, 1.45, 1.55, 80.0)
    assert result.run_count == 1


# queueing re-runs


def test_a_rerun_sends_one_problem_with_an_evaluation_id_of_its_own(
    judged, problems, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        rerun = rerun_of(judged, problems)
        assert sent == []  # nothing leaves before the commit
    for callback in callbacks:
        callback()
    assert rerun.status == Rerun.Status.QUEUED and rerun.base_evaluation_id == judged.evaluation_id
    [(request, queue)] = sent
    assert request.evaluation_id == str(rerun.evaluation_id) != str(judged.evaluation_id)
    assert request.submission_id == judged.pk and request.problems == ["all-reduce"]
    assert queue == "eval.cpu"
    judged.refresh_from_db()
    assert judged.status == Submission.Status.DONE  # still ranked while the re-run waits


def test_each_run_draws_seeds_of_its_own(judged, problems):
    # Hosts derive every input seed from the evaluation id (evaluator/judge/evaluate.py, _seed).
    first = rerun_of(judged, problems)
    assert finish(first.evaluation_id, passed())
    second = rerun_of(judged, problems)
    secret = b"a host's secret, 16 bytes or more"
    ids = [judged.evaluation_id, first.evaluation_id, second.evaluation_id]
    seeds = {trial_seed(secret, str(i), "all-reduce", "eval-1m", "trial", 0) for i in ids}
    assert len(seeds) == 3


def test_one_rerun_at_a_time_per_result(judged, problems, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        rerun_of(judged, problems)
    with django_capture_on_commit_callbacks(execute=True):
        again = rerun_queue(submission=judged, problem=problems["all-reduce"], reason="again")
    assert again is None
    assert len(sent) == 1 and Rerun.objects.count() == 1


def test_only_a_finished_submissions_result_is_rerun(alice, team, problems):
    running = SubmissionFactory(team=team, user=alice, running=True, problems=["all-reduce"])
    assert rerun_queue(submission=running, problem=problems["all-reduce"], reason="x") is None
    done = SubmissionFactory(team=team, user=alice, done=True, problems=["all-gather"])
    assert rerun_queue(submission=done, problem=problems["all-reduce"], reason="x") is None


# recording re-runs


def test_a_rerun_adds_a_run_and_the_result_takes_the_medians(judged, problems):
    judge_again(judged, problems, passed(speedup=1.3, low=1.28, high=1.33, time_us=92.0))
    judge_again(judged, problems, passed(speedup=1.4, low=1.38, high=1.41, time_us=86.0))
    result = judged.results.get()
    runs = list(result.runs.all())
    assert [r.speedup for r in runs] == [1.5, 1.3, 1.4]  # every run kept, oldest first
    assert runs[0].evaluation_id == judged.evaluation_id
    assert len({r.evaluation_id for r in runs}) == 3
    assert result.run_count == 3
    assert result.speedup == 1.4 and result.time_us == 86.0
    # From the lowest end to the highest: how far the runs disagree.
    assert (result.speedup_low, result.speedup_high) == (1.28, 1.55)
    assert result.status == ProblemResult.Status.PASSED and result.flags == []


def test_two_runs_rank_by_their_mean(judged, problems):
    judge_again(judged, problems, passed(speedup=1.3, low=None, high=None, time_us=90.0))
    result = judged.results.get()
    assert result.speedup == pytest.approx(1.4) and result.time_us == pytest.approx(85.0)
    # One run had no interval: it counts by its speedup.
    assert (result.speedup_low, result.speedup_high) == (1.3, 1.55)


def test_the_rerun_is_done_with_its_host(judged, problems):
    rerun = judge_again(judged, problems, passed(speedup=1.3))
    assert rerun.status == Rerun.Status.DONE and rerun.host == "gpu-2"
    assert rerun.finished_at is not None
    assert judged.results.get().runs.last().host == "gpu-2"


def test_a_wrong_answer_on_a_rerun_stops_the_result_ranking(judged, problems):
    wrong = Reported("all-reduce", ProblemStatus.WRONG_ANSWER, 4, message="rank 1: element 3")
    judge_again(judged, problems, wrong)
    result = judged.results.get()
    assert result.status == ProblemResult.Status.WRONG_ANSWER
    assert "rank 1: element 3" in result.message and "Re-run of" in result.message
    assert result.speedup == 1.5  # the passed runs' median, shown, not ranked
    assert result.runs.first().status == ProblemResult.Status.PASSED  # the first is kept
    assert not ProblemResult.objects.counted(profile="cpu").passed().exists()


def test_a_failed_result_shows_the_errors_of_the_run_whose_message_it_shows(judged, problems):
    def wrong(message: str, abs_err: float, rel_err: float) -> Reported:
        return Reported(
            "all-reduce", ProblemStatus.WRONG_ANSWER, 4, message=message,
            max_abs_err=abs_err, max_rel_err=rel_err,
        )  # fmt: skip

    judge_again(judged, problems, wrong("rank 0: first", 40.0, 5.0))
    judge_again(judged, problems, wrong("rank 0: second", 0.25, 0.9))
    result = judged.results.get()
    # The message is the last failed run's; its errors, not the worst of every run's.
    assert "rank 0: second" in result.message
    assert (result.max_abs_err, result.max_rel_err) == (0.25, 0.9)


def test_a_flag_on_a_rerun_flags_the_result(judged, problems):
    judge_again(judged, problems, passed(flags=[ResultFlag.BELOW_FLOOR.value]))
    result = judged.results.get()
    assert result.is_flagged and result.flags == ["below_floor"]


def test_progress_of_a_rerun_is_its_heartbeat(judged, problems):
    rerun = rerun_of(judged, problems)
    eid = str(rerun.evaluation_id)
    assert evaluation_progress(evaluation_id=eid, done=0, total=1, current="all-reduce")
    rerun.refresh_from_db()
    assert rerun.status == Rerun.Status.RUNNING and rerun.heartbeat_at is not None
    judged.refresh_from_db()
    assert judged.status == Submission.Status.DONE and judged.progress_total == 0


def test_a_duplicate_finish_of_a_rerun_changes_nothing(judged, problems):
    rerun = judge_again(judged, problems, passed(speedup=1.3))
    assert not finish(rerun.evaluation_id, passed(speedup=9.0))
    assert judged.results.get().runs.count() == 2


def test_a_failed_rerun_adds_no_run(judged, problems):
    rerun = rerun_of(judged, problems)
    assert finish(rerun.evaluation_id, outcome=EvaluationOutcome.FAILED, reason="host broke")
    rerun.refresh_from_db()
    assert rerun.status == Rerun.Status.FAILED and rerun.reason == "host broke"
    result = judged.results.get()
    assert result.run_count == 1 and result.runs.count() == 1 and result.speedup == 1.5


def test_a_rerun_of_a_submission_queued_again_meanwhile_is_dropped(judged, problems):
    rerun = rerun_of(judged, problems)
    assert submission_requeue(submission=judged, reason="problem changed")
    assert finish(rerun.evaluation_id, passed(speedup=9.0))
    rerun.refresh_from_db()
    assert rerun.status == Rerun.Status.FAILED and "evaluated again" in rerun.reason
    assert not ResultRun.objects.filter(evaluation_id=rerun.evaluation_id).exists()


def test_a_run_judged_against_another_version_is_kept_but_not_counted(judged, problems):
    problem = problems["all-reduce"]
    problem.version += 1
    problem.save()
    judge_again(judged, problems, passed(speedup=3.0))
    result = judged.results.get()
    assert result.runs.count() == 2
    assert result.run_count == 1 and result.speedup == 1.5


# stalled re-runs


def test_a_silent_rerun_fails_and_a_live_one_stays(judged, problems):
    silent = rerun_of(judged, problems)
    Rerun.objects.filter(pk=silent.pk).update(
        status=Rerun.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=3)
    )
    other = SubmissionFactory(team=judged.team, done=True, problems=["all-reduce"])
    assert finish_other(other)
    live = rerun_of(other, problems)
    assert reruns_sweep() == [silent.pk]
    silent.refresh_from_db()
    live.refresh_from_db()
    assert silent.status == Rerun.Status.FAILED and "stalled" in silent.reason
    assert live.status == Rerun.Status.QUEUED
    assert not finish(silent.evaluation_id, passed(speedup=9.0))  # a late finish is dropped


def finish_other(submission):
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.RUNNING)
    return finish(submission.evaluation_id, passed())


def test_a_result_recorded_before_runs_keeps_its_numbers_as_the_first_run(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=2.0)
    judge_again(submission, problems, passed(speedup=1.0, low=0.9, high=1.1))
    result = submission.results.get()
    first, second = result.runs.all()
    assert first.evaluation_id == submission.evaluation_id and first.speedup == 2.0
    assert first.judged_at == submission.finished_at
    assert result.run_count == 2 and result.speedup == pytest.approx(1.5)
    assert (result.speedup_low, result.speedup_high) == (0.9, 2.0)


def test_hosts_are_told_when_a_rerun_is_over(
    judged, problems, liveness_keys, django_capture_on_commit_callbacks
):
    done = rerun_of(judged, problems)
    with django_capture_on_commit_callbacks(execute=True):
        assert finish(done.evaluation_id, passed(speedup=1.4))
    assert liveness_keys.get(liveness.stop_key(str(done.evaluation_id))) == b"finished"
    silent = rerun_of(judged, problems)
    Rerun.objects.filter(pk=silent.pk).update(queued_at=timezone.now() - timedelta(hours=3))
    with django_capture_on_commit_callbacks(execute=True):
        assert reruns_sweep() == [silent.pk]
    assert liveness_keys.get(liveness.stop_key(str(silent.evaluation_id))) == b"stalled"
