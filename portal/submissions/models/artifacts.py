"""Files a host made for a team (a profile run's traces and tables), kept beside its results."""

from __future__ import annotations

import uuid

from django.db import models

from evaluator.face import ARTIFACT_MEDIA_TYPES
from portal.submissions.models.submissions import Submission


def artifact_upload_to(artifact: Artifact, filename: str) -> str:
    # A random name without the host's extension: the stored file is never served by name
    # or type from the media folder, only through the portal's views, as an attachment.
    team = artifact.submission.team_id
    return f"artifacts/{team}/{artifact.submission_id}/{uuid.uuid4().hex}.bin"


class Artifact(models.Model):
    """A host's file for the team: opaque bytes made beside bundle code (a profiler ran in
    the candidate's process), so nothing here is trusted but what the contract checked
    (a plain name, one of four media types, a size cap). Downloadable by its submission's
    team and staff only, always as an attachment of its recorded media type."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="artifacts")
    # The attempt that made it: a new attempt's artifacts replace its predecessor's.
    evaluation_id = models.UUIDField()
    name = models.CharField(max_length=100)
    media_type = models.CharField(max_length=32, choices=[(t, t) for t in ARTIFACT_MEDIA_TYPES])
    # Empty once retention deleted the file (ops/retention.py); the row stays, as a
    # submission's does without its bundle.
    file = models.FileField(upload_to=artifact_upload_to, max_length=255, blank=True)
    size = models.PositiveBigIntegerField()
    truncated = models.BooleanField(default=False)  # cut by the host at the contract's cap
    note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "name"], name="one_artifact_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} of #{self.submission_id}"

    @property
    def is_kept(self) -> bool:
        return bool(self.file)

    @property
    def is_trace(self) -> bool:
        """A Chrome trace (Kineto's JSON), for Perfetto's UI or chrome://tracing."""
        return self.name.endswith(".trace.json")

    @property
    def content_type(self) -> str:
        text = self.media_type.startswith("text/")
        return f"{self.media_type}; charset=utf-8" if text else self.media_type
