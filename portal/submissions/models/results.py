"""A submission's results: recorded per problem, reported while it runs, and each judged
run of them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evaluator.face import ProblemStatus, ResultFlag
from portal.problems.models import Problem
from portal.submissions.models.submissions import Submission


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
        """What the boards are built from: finished ranked submissions of the profile
        (a test, benchmark or profile run never counts), published problems, neither the
        submission nor its team disqualified, judged against the problem's current version
        (a stale result waits for a re-evaluation). A model or agent entry's samples
        (portal/entries) are left out: they are scored per attempt on the entry's own row,
        never as the team's own results."""
        return self.filter(
            submission__entry_sample__isnull=True,
            submission__profile=profile,
            submission__mode=Submission.Mode.RANKED,
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
        # The portal's own: set when a host's report is recorded (services/reported.py).
        BAD_INTERVAL = (
            "bad_interval",
            "its host reported a speedup interval that does not hold the speedup, so it "
            "cannot be counted beyond noise",
        )
        # The portal's own, from the finished message's environment against what the
        # submission's hardware profile requires (services/confinement.py).
        WEAKER_SANDBOX = (
            "weaker_sandbox",
            "judged outside the bubblewrap sandbox its hardware profile requires (the "
            "host's sandbox is under Environment)",
        )
        NOT_FROZEN = (
            "not_frozen",
            "its host did not freeze the candidate while the reference was timed, as its "
            "hardware profile requires",
        )
        # The portal's own, from the host's precheck findings (`review`): an admin clears
        # it (services/review.py), and the result ranks from then on.
        UNDER_REVIEW = (
            "under_review",
            "under review: its code holds patterns that hostile bundles use (below), and an "
            "admin has not cleared it yet",
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
    # The precheck's findings in its code, as its host reported them (contract `review`),
    # and who cleared them when (services/review.py); the admin log keeps the action too.
    review = models.JSONField(default=list, blank=True)
    review_cleared_at = models.DateTimeField(null=True, blank=True)
    review_cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

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
    def is_under_review(self) -> bool:
        return self.Flag.UNDER_REVIEW in self.flags

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
