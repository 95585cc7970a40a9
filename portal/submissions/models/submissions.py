"""A submission: a team's bundle, its state as it is judged, and who may see it."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluator.face import Mode, Phase, ProblemStatus
from portal.accounts.models import Team
from portal.problems.models import Problem

EXAMPLE_LABEL_MAX = 80
_EXTENSIONS = (".tar.gz", ".tgz", ".zip", ".tar", ".py")


def bundle_extension(filename: str) -> str:
    lowered = filename.lower()
    for ext in _EXTENSIONS:
        if lowered.endswith(ext):
            return ext
    match = re.search(r"\.[a-z0-9]{1,8}$", lowered)
    return match.group(0) if match else ".bin"


def bundle_upload_to(submission: Submission, filename: str) -> str:
    # Named by a random id: the user's file name is kept in `bundle_name`, never in a path.
    return f"submissions/{submission.team_id}/{uuid.uuid4().hex}{bundle_extension(filename)}"


class SubmissionQuerySet(models.QuerySet["Submission"]):
    def visible_to(self, user) -> SubmissionQuerySet:
        """Staff see every submission; a team member sees their team's; others see none."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(team__memberships__user=user)

    def for_team(self, team: Team) -> SubmissionQuerySet:
        return self.filter(team=team)

    def active(self) -> SubmissionQuerySet:
        return self.filter(status__in=Submission.ACTIVE)

    def created_since(self, moment: datetime) -> SubmissionQuerySet:
        return self.filter(created_at__gte=moment)

    def disqualified(self) -> SubmissionQuerySet:
        return self.filter(disqualified_at__isnull=False)

    def downloadable_by(self, user, *, now: datetime | None = None) -> SubmissionQuerySet:
        """Bundles are private to their team (and staff) until the problem's solutions are
        published: then a bundle that passed it is anyone's to download."""
        if user.is_authenticated and user.is_staff:
            return self
        public = models.Q(
            results__status=ProblemStatus.PASSED.value,
            results__problem__status=Problem.Status.PUBLISHED,
            results__problem__solutions_public_after__lte=now or timezone.now(),
        )
        # Examples are published code: their whole bundle is anyone's from the start.
        public |= ~models.Q(example_label="")
        # A test, benchmark or profile run is the team's own business, whatever it passed:
        # only ranked code is ever published.
        public &= models.Q(mode=Submission.Mode.RANKED)
        if user.is_authenticated:
            public |= models.Q(team__memberships__user=user)
        return self.filter(public).distinct()

    def ranked(self) -> SubmissionQuerySet:
        return self.filter(mode=Submission.Mode.RANKED)

    def shown_on_team_page(self, user) -> SubmissionQuerySet:
        """A team's public history lists its ranked runs; its members and staff see its
        test, benchmark and profile runs there too."""
        if user.is_authenticated and user.is_staff:
            return self
        shown = models.Q(mode=Submission.Mode.RANKED)
        if user.is_authenticated:
            # A subquery, not a join: the page counts each submission's results.
            shown |= models.Q(team__in=Team.objects.filter(memberships__user=user))
        return self.filter(shown)

    def examples(self) -> SubmissionQuerySet:
        return self.exclude(example_label="")

    def stalled(self, *, heartbeat_before: datetime) -> SubmissionQuerySet:
        return self.filter(status=Submission.Status.RUNNING, heartbeat_at__lt=heartbeat_before)

    def waiting_since(self, *, queued_before: datetime) -> SubmissionQuerySet:
        return self.filter(status=Submission.Status.QUEUED, queued_at__lt=queued_before)


class Submission(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    class Mode(models.TextChoices):
        """What the team asked of the host (evaluator.contract.Mode); only RANKED results
        count on any board, the others are the team's own."""

        TEST = Mode.TEST.value, "Test"
        BENCHMARK = Mode.BENCHMARK.value, "Benchmark"
        RANKED = Mode.RANKED.value, "Ranked"
        PROFILE = Mode.PROFILE.value, "Profile"

    # What each mode does, in a phrase for forms, badges' titles and the API schema.
    MODE_HELP = {
        Mode.TEST: "dev cases, correctness only, no timing; fast; never ranked",
        Mode.BENCHMARK: "the full judging, shown to your team only; never ranked",
        Mode.RANKED: "the full judging; counts on the boards",
        Mode.PROFILE: "one case judged under the profiler, traces for your team; never ranked",
    }

    class Phase(models.TextChoices):
        """What a running evaluation does now, as its host last said (evaluator.contract)."""

        UNKNOWN = "", "Running"  # a host that does not say (older), or not started yet
        COMPILING = Phase.COMPILING.value, "Compiling"
        JUDGING = Phase.JUDGING.value, "Judging"

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="submissions")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions"
    )
    bundle = models.FileField(upload_to=bundle_upload_to, max_length=255)
    bundle_name = models.CharField(max_length=255)
    bundle_sha256 = models.CharField(max_length=64)
    profile = models.CharField(max_length=32)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.RANKED)
    # PROFILE: the public case the team asked to profile ("" = the host picks); never an
    # unpublished eval case, whose trace would reveal it.
    profile_case = models.CharField(max_length=80, blank=True)
    problems = models.JSONField(default=list)  # the slugs the bundle solves
    # {slug: Problem.version} when the current attempt was queued: what its results are
    # judged against. Empty for submissions queued before it was recorded.
    problem_versions = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    reason = models.TextField(blank=True)
    # Names one attempt; a requeue draws a new one, so an abandoned attempt's messages are
    # recognised and dropped.
    evaluation_id = models.UUIDField(default=uuid.uuid4, unique=True)
    attempts = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    host = models.CharField(max_length=200, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    current_problem = models.CharField(max_length=80, blank=True)
    progress_phase = models.CharField(
        max_length=16, choices=Phase.choices, default=Phase.UNKNOWN, blank=True
    )
    environment = models.JSONField(default=dict, blank=True)
    # Set by an admin: the submission's results never rank; the team sees the reason.
    disqualified_at = models.DateTimeField(null=True, blank=True)
    disqualification_reason = models.TextField(blank=True)
    # Set by staff: an example bundle (e.g. examples/fast), shown on the boards as a row of
    # its own under this public label, never ranked; its bundle is public.
    example_label = models.CharField(
        max_length=EXAMPLE_LABEL_MAX,
        blank=True,
        help_text=(
            "Makes this an example: shown on the boards under this public label, beside the "
            "baseline, never ranked; anyone may download its bundle. Empty for a team's "
            "submission."
        ),
    )

    # Failed through the platform's fault (its host lost again and again, no worker, the
    # evaluator's own error), not the bundle's: it never counts against the team's quota.
    platform_fault = models.BooleanField(default=False)

    # {slug: digest of the code the problem runs} (portal/submissions/digests.py), taken
    # when the bundle is stored: runs of the same code pool on the boards.
    code_digests = models.JSONField(default=dict, blank=True)
    # {slug: [finding, ...]} of the precheck at upload (evaluator/intake/precheck.py), so
    # the team sees at once what its host will report and an admin will review.
    precheck = models.JSONField(default=dict, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.bundle_name} ({self.team})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def is_disqualified(self) -> bool:
        """Disqualified on its own or with its whole team."""
        return self.disqualified_at is not None or self.team.is_disqualified

    @property
    def is_example(self) -> bool:
        return bool(self.example_label)

    @property
    def is_ranked(self) -> bool:
        return self.mode == self.Mode.RANKED

    @property
    def planned_count(self) -> int:
        """Problems this attempt will evaluate, before its host has said so."""
        return self.progress_total or len(self.problems)


class ActiveSubmission(Submission):
    """The queue, for admins: submissions waiting for or running on a host."""

    class Meta:
        proxy = True
        verbose_name = "queued or running submission"
        verbose_name_plural = "queue (queued and running submissions)"
