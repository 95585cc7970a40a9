"""An entry is a model (or an agent around one) that a team evaluates on the hidden set.

It declares up front how many samples it sends per problem (n) and the k of its pass@k;
each sample is one bundle, a ranked submission of the team that belongs to the entry
(EntrySample): the people's boards never count it (ProblemResultQuerySet.judged leaves entry
samples out), the entry's scores do (portal/entries/selectors.py). Per problem, the i-th
sample that solves it is its attempt number i (EntryAttempt); a unique constraint keeps
any problem from getting more than one attempt of a number, and the service refuses
numbers past n.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.urls import reverse

from portal.accounts.models import Team
from portal.problems.models import Problem
from portal.submissions.models import Submission


class Kind(models.TextChoices):
    MODEL = "model", "Model"
    AGENT = "agent", "Agent"


class Who(models.TextChoices):
    """Which rows a board shows: the people's teams, the entries, or both."""

    ALL = "all", "All"
    PEOPLE = "people", "People"
    MODELS = "models", "Models and agents"


class EntryQuerySet(models.QuerySet["Entry"]):
    def in_good_standing(self) -> EntryQuerySet:
        """Entries whose team is not disqualified: the ones boards show."""
        return self.filter(team__disqualified_at__isnull=True)


class Entry(models.Model):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="entries")
    slug = models.SlugField(
        max_length=64, unique=True, help_text="The entry's name in URLs and in `pkb --entry`."
    )
    name = models.CharField(max_length=80, help_text="Shown on the boards.")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    model_name = models.CharField(max_length=120)
    model_version = models.CharField(max_length=120, blank=True)
    harness = models.CharField(
        max_length=200, blank=True, help_text="The agent or harness that drove the model."
    )
    sampling = models.CharField(
        max_length=300, blank=True, help_text="Sampling settings, e.g. temperature=0.8 top_p=0.95"
    )
    note = models.TextField(blank=True)
    evaluated_on = models.DateField(help_text="The date of the evaluation (the model's snapshot).")
    # Declared before the first sample and fixed from then on: pass@k is only unbiased over
    # the samples that were going to be drawn anyway.
    samples_per_problem = models.PositiveSmallIntegerField()
    k = models.PositiveSmallIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="entries"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = EntryQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        verbose_name_plural = "entries"
        constraints = [
            models.UniqueConstraint(Lower("name"), name="entry_name_unique_ci"),
            models.CheckConstraint(
                condition=models.Q(k__gte=1, samples_per_problem__gte=models.F("k")),
                name="entry_n_at_least_k",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("entries:detail", args=[self.slug])

    @property
    def n(self) -> int:
        return self.samples_per_problem


class EntryBatch(models.Model):
    """The samples sent in one request: followed together by `pkb submit --entry`."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="batches")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"batch {self.pk} of {self.entry}"


class EntrySample(models.Model):
    """One sample of an entry: one bundle, one submission of the entry's team."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="samples")
    batch = models.ForeignKey(EntryBatch, on_delete=models.PROTECT, related_name="samples")
    submission = models.OneToOneField(
        Submission, on_delete=models.PROTECT, related_name="entry_sample"
    )
    number = models.PositiveIntegerField(help_text="1, 2, ... in the order the entry sent them.")

    class Meta:
        ordering = ["entry", "number"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "number"], name="one_sample_per_number"),
        ]

    def __str__(self) -> str:
        return f"sample {self.number} of {self.entry}"

    def get_absolute_url(self) -> str:
        return reverse("entries:sample", args=[self.entry.slug, self.number])


class EntryAttempt(models.Model):
    """A sample's attempt at one problem: the entry's `number`-th on that problem."""

    entry = models.ForeignKey(Entry, on_delete=models.PROTECT, related_name="attempts")
    sample = models.ForeignKey(EntrySample, on_delete=models.CASCADE, related_name="attempts")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField()

    class Meta:
        ordering = ["entry", "problem", "number"]
        constraints = [
            # Two batches at once cannot both take a problem's last attempt.
            models.UniqueConstraint(
                fields=["entry", "problem", "number"], name="one_attempt_per_number"
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.entry} on {self.problem_id}"
