"""Hosts' reports for the portal's tests: results sent through the portal's own services,
as the evaluator's messages reach them."""

from __future__ import annotations

from evaluator.contract import EvaluationOutcome, ProblemStatus, finished_message
from evaluator.contract import ProblemResult as Reported
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_finish, evaluation_start
from tests.portal.factories import SubmissionFactory

# What a production host reports of where bundle code ran: the sandbox and the freezer that
# every profile requires (evaluator/host/profiles.py), so the results may rank.
CONFINED = {"sandbox": "bubblewrap", "candidate_frozen": True}
AROUND = object()  # an interval 0.05 either side of the speedup, as a host would report


def passed(slug="all-reduce", speedup=1.5, low=AROUND, high=AROUND, time_us=80.0, **kwargs):
    """A pass as a host reports it: its speedup with a confidence interval that holds it
    (0.05 either side unless given; None for a host that reports none)."""
    return Reported(
        slug,
        ProblemStatus.PASSED,
        4,
        time_us=time_us,
        ref_time_us=time_us * speedup,
        speedup=speedup,
        speedup_low=round(speedup - 0.05, 6) if low is AROUND else low,
        speedup_high=round(speedup + 0.05, 6) if high is AROUND else high,
        **kwargs,
    )


def finish(
    evaluation_id, *results, outcome=EvaluationOutcome.DONE, reason="", environment=CONFINED
) -> bool:
    message = finished_message(
        evaluation_id=str(evaluation_id),
        outcome=outcome,
        reason=reason,
        results=list(results),
        environment=environment,
    )
    return evaluation_finish(message=message)


def judged(*, team, user, speedup, slug="all-reduce", low=None, high=None) -> Submission:
    """A submission of the team evaluated once, with the speedup on one problem (and an
    interval 0.05 either side unless given)."""
    submission = SubmissionFactory(team=team, user=user, running=True, problems=[slug])
    low = speedup - 0.05 if low is None else low
    high = speedup + 0.05 if high is None else high
    assert finish(submission.evaluation_id, passed(slug, speedup, low, high))
    submission.refresh_from_db()
    return submission


def judge_rerun(rerun, result: Reported, *, host="gpu-2", environment=CONFINED) -> None:
    """The host's messages about a re-run: started, then finished with the result."""
    assert evaluation_start(evaluation_id=str(rerun.evaluation_id), host=host)
    assert finish(rerun.evaluation_id, result, environment=environment)
    rerun.refresh_from_db()
