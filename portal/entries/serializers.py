"""Shapes of the entries' JSON in the API. No logic: the values come from the selectors."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from rest_framework import serializers

from portal.entries.models import Entry, Kind

ESTIMATOR = (
    "Unbiased estimator over the problem's judged samples (Chen et al. 2021): "
    "1 - C(n - c, k) / C(n, k); as a share of the board's problems, weighted, a problem "
    "without samples counting 0. null while some problem with samples has fewer than k "
    "judged."
)


def _absolute(context: dict, path: str) -> str:
    request = context.get("request")
    return request.build_absolute_uri(path) if request else path


class _Strict:
    """JSON as the schema says it: DRF would take 0 for the text "0" and "3" for the number
    3, which a client that sent them did not mean (the schema fuzzer checks it)."""

    kinds: tuple[type, ...] = (str,)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, self.kinds):
            self.fail("invalid")  # type: ignore[attr-defined]
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictCharField(_Strict, serializers.CharField):
    default_error_messages = {"invalid": "Not a string."}


class StrictSlugField(_Strict, serializers.SlugField):
    pass


class StrictIntegerField(_Strict, serializers.IntegerField):
    kinds = (int,)


class EntrySerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.SlugField: StrictSlugField,
    }

    team = serializers.CharField(source="team.slug", read_only=True)
    team_name = serializers.CharField(source="team.name", read_only=True)
    samples_per_problem = StrictIntegerField(
        min_value=1,
        help_text="n: samples the entry will send per problem, declared before the first; "
        "more are refused.",
    )
    k = StrictIntegerField(min_value=1, help_text="The k of pass@k; at most n.")
    kind = serializers.ChoiceField(choices=Kind.choices)
    evaluated_on = serializers.DateField(required=False, help_text="Default: today.")
    html_url = serializers.SerializerMethodField()

    class Meta:
        model = Entry
        fields = [
            "slug",
            "name",
            "kind",
            "team",
            "team_name",
            "model_name",
            "model_version",
            "harness",
            "sampling",
            "note",
            "evaluated_on",
            "samples_per_problem",
            "k",
            "created_at",
            "html_url",
        ]
        read_only_fields = ["created_at"]
        extra_kwargs = {"slug": {"required": False, "validators": []}}

    def get_html_url(self, entry: Entry) -> str:
        return _absolute(self.context, reverse("entries:detail", args=[entry.slug]))


class ScoresSerializer(serializers.Serializer):
    k = serializers.IntegerField()
    pass_at_1 = serializers.FloatField(allow_null=True, help_text="pass@1. " + ESTIMATOR)
    pass_at_k = serializers.FloatField(allow_null=True, help_text="pass@k, the entry's k.")
    fast_1_at_1 = serializers.FloatField(
        allow_null=True,
        help_text="fast_1@1: as pass@1, a sample counting when it passed with the speedup's "
        "interval wholly above 1 (the board's rule).",
    )
    fast_1_at_k = serializers.FloatField(allow_null=True, help_text="fast_1@k.")
    total = serializers.IntegerField(help_text="Problems in the board's scope.")
    sent = serializers.IntegerField(help_text="Attempts sent on the scope's problems.")
    judged = serializers.IntegerField(help_text="Of them, judged (counted in n).")
    complete = serializers.BooleanField(
        help_text="Every attempt sent is judged, and each problem tried has the entry's "
        "declared n of them."
    )


class ProblemScoreSerializer(serializers.Serializer):
    problem = serializers.CharField(source="slug")
    category = serializers.CharField()
    sent = serializers.IntegerField()
    n = serializers.IntegerField(help_text="Judged samples.")
    c = serializers.IntegerField(help_text="Of them, passed.")
    f = serializers.IntegerField(help_text="Of them, passed with the interval above 1.")
    pass_at_1 = serializers.SerializerMethodField()
    pass_at_k = serializers.SerializerMethodField()
    fast_1_at_1 = serializers.SerializerMethodField()
    fast_1_at_k = serializers.SerializerMethodField()

    def _k(self) -> int:
        return self.context["k"]

    def get_pass_at_1(self, p) -> float | None:
        return p.at(1, p.c)

    def get_pass_at_k(self, p) -> float | None:
        return p.at(self._k(), p.c)

    def get_fast_1_at_1(self, p) -> float | None:
        return p.at(1, p.f)

    def get_fast_1_at_k(self, p) -> float | None:
        return p.at(self._k(), p.f)


class EntryScoresSerializer(ScoresSerializer):
    problems = serializers.SerializerMethodField()

    def get_problems(self, scores) -> list[dict]:
        context = {**self.context, "k": scores.k}
        return ProblemScoreSerializer(scores.problems, many=True, context=context).data


class AttemptSerializer(serializers.Serializer):
    problem = serializers.CharField(source="slug")
    attempt = serializers.IntegerField()
    outcome = serializers.CharField(help_text="As the dataset's outcome column (docs/dataset.md).")
    judged = serializers.BooleanField()
    passed = serializers.BooleanField()
    speedup = serializers.FloatField(allow_null=True)
    speedup_low = serializers.FloatField(allow_null=True)
    speedup_high = serializers.FloatField(allow_null=True)
    roofline = serializers.FloatField(allow_null=True)
    time_us = serializers.FloatField(allow_null=True)
    ref_time_us = serializers.FloatField(allow_null=True)
    problem_version = serializers.IntegerField(allow_null=True)


class SampleSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    batch = serializers.IntegerField(source="batch_id")
    submission_id = serializers.IntegerField()
    status = serializers.CharField(help_text="The sample's submission: queued, running, done...")
    problems = serializers.ListField(child=serializers.CharField())
    passed = serializers.IntegerField()
    judged = serializers.IntegerField()
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    attempts = serializers.SerializerMethodField()
    html_url = serializers.SerializerMethodField()

    def get_attempts(self, line) -> list[dict]:
        mine = [a for a in self.context["attempts"] if a.sample_number == line.number]
        return AttemptSerializer(mine, many=True).data

    def get_html_url(self, line) -> str:
        path = reverse("entries:sample", args=[self.context["entry"].slug, line.number])
        return _absolute(self.context, path)


class EntryQuotaSerializer(serializers.Serializer):
    used = serializers.IntegerField(help_text="Samples sent in the last 24 hours.")
    limit = serializers.IntegerField(help_text="PKB_ENTRY_SAMPLES_PER_DAY.")
    remaining = serializers.IntegerField()
    next_slot_at = serializers.DateTimeField(allow_null=True)


class EntryStatusSerializer(serializers.Serializer):
    """An entry, its samples (of one batch, for a batch) and its scores."""

    entry = EntrySerializer()
    profile = serializers.CharField()
    finished = serializers.BooleanField(help_text="No sample is queued or running.")
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Samples per status."
    )
    scores = EntryScoresSerializer()
    quota = EntryQuotaSerializer()
    samples = serializers.SerializerMethodField()

    def get_samples(self, status) -> list[dict]:
        context = {**self.context, "attempts": status.attempts, "entry": status.entry}
        return SampleSerializer(status.samples, many=True, context=context).data


class BatchSerializer(EntryStatusSerializer):
    batch = serializers.IntegerField(source="batch_id")
    url = serializers.SerializerMethodField()

    def get_url(self, status) -> str:
        path = reverse("api:entry-batch", args=[status.entry.slug, status.batch_id])
        return _absolute(self.context, path)


class EntryListItemSerializer(serializers.Serializer):
    entry = EntrySerializer()
    scores = ScoresSerializer()


class SamplesUploadSerializer(serializers.Serializer):
    samples = serializers.ListField(
        child=serializers.FileField(),
        help_text="One bundle per sample (repeat the field), as on the Submit page: a .zip or "
        ".tar.gz of `<problem-slug>.py` files, or one .py. At most the entry's n per batch.",
    )
