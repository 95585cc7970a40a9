"""Writes of the submissions app: creating and queueing bundles, recording evaluations."""

from portal.submissions.services.curation import (
    problem_best_submissions,
    problem_reevaluate,
    submission_disqualify,
    submission_reinstate,
)
from portal.submissions.services.evaluations import (
    evaluation_finish,
    evaluation_progress,
    evaluation_start,
)
from portal.submissions.services.reruns import (
    rerun_queue,
    reruns_sweep,
    result_aggregate,
)
from portal.submissions.services.submissions import (
    SubmissionError,
    submission_cancel,
    submission_create,
    submission_requeue,
)
from portal.submissions.services.sweeper import SweepReport, submissions_sweep

__all__ = [
    "SubmissionError",
    "SweepReport",
    "evaluation_finish",
    "problem_best_submissions",
    "problem_reevaluate",
    "rerun_queue",
    "reruns_sweep",
    "result_aggregate",
    "submission_disqualify",
    "submission_reinstate",
    "evaluation_progress",
    "evaluation_start",
    "submission_cancel",
    "submission_create",
    "submission_requeue",
    "submissions_sweep",
]
