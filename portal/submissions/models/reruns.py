"""Re-runs for the ranking (services/reruns.py)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models

from portal.problems.models import Problem
from portal.submissions.models.submissions import Submission


class RerunQuerySet(models.QuerySet["Rerun"]):
    def active(self) -> RerunQuerySet:
        return self.filter(status__in=Rerun.ACTIVE)

    def stalled(self, *, heartbeat_before: datetime) -> RerunQuerySet:
        """Active re-runs whose host is silent, or that no host took, since the moment."""
        return self.active().filter(
            models.Q(heartbeat_at__lt=heartbeat_before)
            | models.Q(heartbeat_at__isnull=True, queued_at__lt=heartbeat_before)
        )


class Rerun(models.Model):
    """A finished submission judged again on one problem, with fresh seeds, for the ranking.

    It has its own evaluation id and state, so the submission stays done and ranked (and
    out of its team's quota) while the re-run waits and runs; a done re-run adds a
    ResultRun to the submission's result.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="reruns")
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="reruns")
    evaluation_id = models.UUIDField(default=uuid.uuid4, unique=True)
    # The submission's attempt being re-judged: a re-run that finishes after the submission
    # was queued again (a new attempt replaces its results) is dropped.
    base_evaluation_id = models.UUIDField()
    problem_version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    host = models.CharField(max_length=200, blank=True)

    objects = RerunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]
        constraints = [
            # One at a time per result: two re-runs asked for at once queue one.
            models.UniqueConstraint(
                fields=["submission", "problem"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_active_rerun_per_result",
            )
        ]

    def __str__(self) -> str:
        return f"re-run of {self.problem_id} in #{self.submission_id} ({self.status})"
