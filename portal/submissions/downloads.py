"""What a stored bundle's download holds for someone outside its team; and how a host's
artifact is served to the team.

Once a problem's solutions are public, anyone may download a bundle that passed it
(SubmissionQuerySet.downloadable_by); but the bundle may also solve problems whose
solutions are not public, or not published at all. Then outsiders get an archive of the
public problems' files only: helper modules and other files are left out, since nothing
says which problem they serve.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from datetime import datetime

from django.http import FileResponse, Http404
from django.utils import timezone

from evaluator.face import BundleError, is_artifact_name, read_bundle
from portal.problems.models import Problem
from portal.submissions.models import Artifact, Submission

# Members of the filtered archive carry this date, not the time of the download: the same
# public files give the same bytes.
_MEMBER_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Download:
    filename: str
    data: bytes | None  # None: serve the stored file as it is


def public_slugs(submission: Submission, *, now: datetime | None = None) -> set[str]:
    """The bundle's problems whose solutions are public now."""
    return set(
        Problem.objects.published()
        .filter(slug__in=submission.problems, solutions_public_after__lte=now or timezone.now())
        .values_list("slug", flat=True)
    )


def public_download(submission: Submission, *, now: datetime | None = None) -> Download | None:
    """The download an outsider gets; None if nothing of it may be served."""
    slugs = public_slugs(submission, now=now)
    if not slugs:
        return None
    if slugs >= set(submission.problems):
        return Download(f"submission-{submission.pk}-{submission.bundle_name}", None)
    with submission.bundle.open("rb") as fh:
        stored = fh.read()
    try:
        bundle = read_bundle(submission.bundle_name, stored, known_slugs=submission.problems)
    except BundleError:
        return None  # checked at upload; refused now by newer checks: serve nothing
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for slug in sorted(slugs & set(bundle.solutions)):
            path = bundle.solutions[slug]
            archive.writestr(zipfile.ZipInfo(path, _MEMBER_DATE), bundle.files[path])
    return Download(f"submission-{submission.pk}-public.zip", buffer.getvalue())


def artifact_of(submission: Submission, name: str) -> Artifact:
    """The submission's artifact of that name, or a 404; a name no host could have sent (a
    NUL byte, a slash...) is a 404 without a query."""
    if not is_artifact_name(name):
        raise Http404("No artifact of that name: artifacts have plain file names.")
    artifact = submission.artifacts.filter(name=name).first()
    if artifact is None:
        raise Http404("The submission has no artifact of that name.")
    return artifact


def artifact_response(artifact: Artifact) -> FileResponse:
    """The artifact as an attachment of its recorded media type (one of the contract's
    four, never HTML), with sniffing off: its bytes were made beside bundle code."""
    if not artifact.is_kept:
        raise Http404("The artifact's file was deleted with the run's other old data.")
    try:
        handle = artifact.file.open("rb")
    except FileNotFoundError:
        raise Http404("The artifact's file is gone.") from None
    response = FileResponse(
        handle, as_attachment=True, filename=artifact.name, content_type=artifact.content_type
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response
