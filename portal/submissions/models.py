from __future__ import annotations

import re
import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluator.contract import Phase, ProblemStatus, ResultFlag
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
            results__status=ProblemResult.Status.PASSED,
            results__problem__status=Problem.Status.PUBLISHED,
            results__problem__solutions_public_after__lte=now or timezone.now(),
        )
        # Examples are published code: their whole bundle is anyone's from the start.
        public |= ~models.Q(example_label="")
        if user.is_authenticated:
            public |= models.Q(team__memberships__user=user)
        return self.filter(public).distinct()

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

    # {slug: digest of the code the problem runs} (portal/submissions/digests.py), taken
    # when the bundle is stored: runs of the same code pool on the boards.
    code_digests = models.JSONField(default=dict, blank=True)

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
    def planned_count(self) -> int:
        """Problems this attempt will evaluate, before its host has said so."""
        return self.progress_total or len(self.problems)


class ActiveSubmission(Submission):
    """The queue, for admins: submissions waiting for or running on a host."""

    class Meta:
        proxy = True
        verbose_name = "queued or running submission"
        verbose_name_plural = "queue (queued and running submissions)"


class ProblemResultQuerySet(models.QuerySet["ProblemResult"]):
    def passed(self) -> ProblemResultQuerySet:
        return self.filter(status=ProblemResult.Status.PASSED)

    def unflagged(self) -> ProblemResultQuerySet:
        """Results no check has cast doubt on: a flagged pass is kept, never ranked."""
        return self.filter(flags=[])

    def counted(self, *, profile: str) -> ProblemResultQuerySet:
        """Results that may rank: the `judged` ones of teams' submissions (an example's
        is shown beside the ranking, never in it)."""
        return self.judged(profile=profile).filter(submission__example_label="")

    def judged(self, *, profile: str) -> ProblemResultQuerySet:
        """What the boards are built from: finished submissions of the profile, published
        problems, neither the submission nor its team disqualified, judged against the
        problem's current version (a stale result waits for a re-evaluation). A model or
        agent entry's samples (portal/entries) are left out: they are scored per attempt on
        the entry's own row, never as the team's own results."""
        return self.filter(
            submission__entry_sample__isnull=True,
            submission__profile=profile,
            submission__status=Submission.Status.DONE,
            submission__disqualified_at__isnull=True,
            submission__team__disqualified_at__isnull=True,
            problem__status=Problem.Status.PUBLISHED,
            problem_version=models.F("problem__version"),
        )


class ProblemResult(models.Model):
    class Status(models.TextChoices):
        PASSED = ProblemStatus.PASSED.value, "Passed"
        WRONG_ANSWER = ProblemStatus.WRONG_ANSWER.value, "Wrong answer"
        RUNTIME_ERROR = ProblemStatus.RUNTIME_ERROR.value, "Runtime error"
        TIMEOUT = ProblemStatus.TIMEOUT.value, "Timeout"
        COMPILE_ERROR = ProblemStatus.COMPILE_ERROR.value, "Compile error"
        NOT_RUN = ProblemStatus.NOT_RUN.value, "Not run"

    class Flag(models.TextChoices):
        """Why a result is not trusted; the label completes "flagged: ..."."""

        BELOW_FLOOR = (
            ResultFlag.BELOW_FLOOR.value,
            "faster than the links can move its bytes",
        )
        TAMPERED = (
            ResultFlag.TAMPERED.value,
            "the bundle replaced the harness's clocks, timing or synchronisation functions",
        )

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="results")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="results")
    # The problem's version when the evaluation was requested; only results at the
    # problem's current version rank.
    problem_version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices)
    world_size = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    log = models.TextField(blank=True)  # capped by the contract (head and tail)
    time_us = models.FloatField(null=True, blank=True)
    ref_time_us = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    # The speedup's confidence interval, from reference and candidate rounds timed side by
    # side (evaluator/contract.py); None for results of hosts that did not report one.
    speedup_low = models.FloatField(null=True, blank=True)
    speedup_high = models.FloatField(null=True, blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    # Mean over cases of floor / time: 1.0 is the link limit; None without a byte model
    # or a measured bandwidth (CPU hosts).
    roofline = models.FloatField(null=True, blank=True)
    # Flag values; any flag keeps a passed result off the leaderboard, an unknown one too.
    flags = models.JSONField(default=list, blank=True)
    cases = models.JSONField(default=list, blank=True)
    # Judged runs at this result's problem version (1 until a re-run for the ranking): the
    # numbers above are their medians (services/reruns.py).
    run_count = models.PositiveIntegerField(default=1)
    # Its submission's `code_digests[slug]`, copied when the result is recorded so that the
    # boards group by it in SQL; empty: code that pools with no other (counts alone).
    code_digest = models.CharField(max_length=64, blank=True)

    objects = ProblemResultQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "problem"], name="one_result_per_problem"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.problem_id} in #{self.submission_id}: {self.status}"

    @property
    def is_flagged(self) -> bool:
        """A pass that does not count: shown as evidence, left off the leaderboard."""
        return self.status == self.Status.PASSED and bool(self.flags)

    @property
    def is_stale(self) -> bool:
        """Judged against an older version of the problem: shown, not ranked."""
        return self.problem_version != self.problem.version

    @property
    def flag_reasons(self) -> list[str]:
        return [
            self.Flag(flag).label if flag in self.Flag.values else str(flag) for flag in self.flags
        ]


class ProvisionalResult(models.Model):
    """A problem's result as its host reported it while the evaluation still ran: shown on
    the submission's page so that rows fill in as problems are judged (over hours on GPUs).
    Never read by the boards; the finished message's results replace these (its recording
    deletes them), and only those count."""

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="provisional_results"
    )
    # The attempt that judged it: a requeued submission's page shows only its current one's.
    evaluation_id = models.UUIDField()
    slug = models.CharField(max_length=80)
    fields = models.JSONField()  # ProblemResult's reported fields (services/reported.py)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation_id", "slug"], name="one_provisional_result_per_problem"
            )
        ]

    def __str__(self) -> str:
        return f"{self.slug} in #{self.submission_id} (provisional)"


class ResultRun(models.Model):
    """One judged run of a problem result: the submission's own evaluation, then each re-run
    for the ranking, each on inputs from seeds of its own. Kept side by side, never replaced;
    the result holds their medians."""

    result = models.ForeignKey(ProblemResult, on_delete=models.CASCADE, related_name="runs")
    # The attempt that judged it: hosts derive every input seed of a run from it
    # (evaluator/judge/seeds.py), so a new id is a new draw of inputs.
    evaluation_id = models.UUIDField()
    judged_at = models.DateTimeField()
    host = models.CharField(max_length=200, blank=True)
    problem_version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=ProblemResult.Status.choices)
    world_size = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    log = models.TextField(blank=True)
    time_us = models.FloatField(null=True, blank=True)
    ref_time_us = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    speedup_low = models.FloatField(null=True, blank=True)
    speedup_high = models.FloatField(null=True, blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    roofline = models.FloatField(null=True, blank=True)
    flags = models.JSONField(default=list, blank=True)
    cases = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["judged_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["result", "evaluation_id"], name="one_run_per_attempt")
        ]

    def __str__(self) -> str:
        return f"run {self.evaluation_id} of {self.result}"

    @property
    def seed(self) -> str:
        """The public name of the run's input draw: the hosts' seeds are secret-keyed
        hashes of the evaluation id, so the id names the draw without revealing it."""
        return self.evaluation_id.hex[:12]

    @property
    def is_passed(self) -> bool:
        return self.status == ProblemResult.Status.PASSED and not self.flags


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
