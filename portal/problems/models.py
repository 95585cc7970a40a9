from __future__ import annotations

from datetime import datetime

from django.db import models
from django.urls import reverse
from django.utils import timezone


class Category(models.TextChoices):
    # Mirrors problems.spec.Category and its labels (a test keeps them equal). Spelled out
    # rather than imported: problems.spec imports torch, which the web process has no use for.
    COLLECTIVE = "collective", "Collective primitives"
    TENSOR = "tensor", "Tensor parallel"
    SEQUENCE = "sequence", "Sequence parallel"
    CONTEXT = "context", "Context parallel"
    PIPELINE = "pipeline", "Pipeline parallel"
    DATA = "data", "Data parallel"
    EXPERT = "expert", "Expert parallel"
    FSDP = "fsdp", "FSDP / ZeRO"
    VOCAB = "vocab", "Vocab parallel"
    GRAPH = "graph", "Graph"
    GEOMETRIC = "geometric", "Geometric / spatial"
    OTHER = "other", "Other"


class ProblemQuerySet(models.QuerySet["Problem"]):
    def published(self) -> ProblemQuerySet:
        return self.filter(status=Problem.Status.PUBLISHED)

    def in_category(self, category: str | None) -> ProblemQuerySet:
        return self.filter(category=category) if category else self

    def in_catalog_order(self) -> ProblemQuerySet:
        """Categories in the order of the catalog (collectives first), then by title."""
        order = models.Case(
            *[models.When(category=c.value, then=models.Value(i)) for i, c in enumerate(Category)],
            output_field=models.IntegerField(),
        )
        return self.alias(category_order=order).order_by("category_order", "title", "slug")


class Problem(models.Model):
    class Status(models.TextChoices):
        PUBLISHED = "published", "Published"
        HIDDEN = "hidden", "Hidden"
        RETIRED = "retired", "Retired"

    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    category = models.CharField(max_length=16, choices=Category.choices)
    signature = models.TextField(blank=True)
    description = models.TextField(blank=True)
    reference_source = models.TextField(blank=True)
    world_sizes = models.JSONField(default=list)
    dtypes = models.JSONField(default=list)
    # The public dev cases ([{name, dtype, params}]): the shapes a team can try locally.
    # Production hosts judge eval cases that are never published; `demo_cases` below are the
    # repository's labelled stand-ins.
    public_cases = models.JSONField(default=list, blank=True)
    # The repository's eval cases, a labelled demo set (production hosts judge unpublished
    # ones), each with the bytes one rank must move at each world size:
    # [{name, dtype, params, bytes_moved: {"2": n, ...}}], the roofline's numerator.
    demo_cases = models.JSONField(default=list, blank=True)
    # dtype -> {"atol", "rtol"} for every dtype the problem's cases use; 0 and 0 is exact.
    tolerances = models.JSONField(default=dict, blank=True)
    # The catalog's helper modules the reference imports: [{"path", "source"}].
    helper_modules = models.JSONField(default=list, blank=True)
    # A self-contained `<slug>.py` to start from (portal/problems/starter.py).
    starter_source = models.TextField(blank=True)
    # The catalog's title, category and description as sync_problems last wrote them: the
    # three mirrored fields the admin form edits. A row that differs from them was edited by
    # an admin, which sync then keeps (or replaces, saying so, when the catalog changed too).
    catalog_text = models.JSONField(default=dict, blank=True, editable=False)
    # `version` counts the changes of the catalog's `code_version` (a hash of the module).
    version = models.PositiveIntegerField(default=1)
    code_version = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PUBLISHED)
    weight = models.FloatField(default=1.0)
    # Hardware profile names (evaluator/host/profiles.py) the problem is judged on; empty: all.
    profiles = models.JSONField(default=list, blank=True)
    # From then on, anyone may download the bundles that passed this problem.
    solutions_public_after = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["category", "title"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        # The admin's "View on site": staff preview a hidden problem there.
        return reverse("problems:detail", args=[self.slug])

    def runs_on(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles

    def solutions_are_public(self, now: datetime | None = None) -> bool:
        after = self.solutions_public_after
        return after is not None and after <= (now or timezone.now())

    @property
    def category_label(self) -> str:
        return Category(self.category).label

    @property
    def summary(self) -> str:
        """The first sentence of the description, for lists."""
        text = " ".join(self.description.split())
        head, dot, _ = text.partition(". ")
        return head + "." if dot else text
