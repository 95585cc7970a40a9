"""The submissions app's models, one module per part: submissions, their results, re-runs,
artifacts."""

from portal.submissions.models.artifacts import Artifact, artifact_upload_to
from portal.submissions.models.reruns import Rerun, RerunQuerySet
from portal.submissions.models.results import (
    ProblemResult,
    ProblemResultQuerySet,
    ProvisionalResult,
    ResultRun,
)
from portal.submissions.models.submissions import (
    EXAMPLE_LABEL_MAX,
    ActiveSubmission,
    Submission,
    SubmissionQuerySet,
    bundle_extension,
    bundle_upload_to,
)

__all__ = [
    "Artifact",
    "EXAMPLE_LABEL_MAX",
    "ActiveSubmission",
    "ProblemResult",
    "ProblemResultQuerySet",
    "ProvisionalResult",
    "Rerun",
    "RerunQuerySet",
    "ResultRun",
    "Submission",
    "SubmissionQuerySet",
    "artifact_upload_to",
    "bundle_extension",
    "bundle_upload_to",
]
