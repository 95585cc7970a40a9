"""Shapes of the API's JSON. No logic: the values come from the selectors."""

from __future__ import annotations

from rest_framework import serializers

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission


class ProblemSerializer(serializers.ModelSerializer):
    category_label = serializers.CharField()
    url = serializers.HyperlinkedIdentityField(view_name="api:problem", lookup_field="slug")

    class Meta:
        model = Problem
        fields = [
            "slug",
            "url",
            "title",
            "category",
            "category_label",
            "signature",
            "description",
            "world_sizes",
            "dtypes",
            "version",
        ]


class ProblemDetailSerializer(ProblemSerializer):
    class Meta(ProblemSerializer.Meta):
        fields = [*ProblemSerializer.Meta.fields, "reference_source"]


class ScoreSerializer(serializers.Serializer):
    solved = serializers.IntegerField()
    faster = serializers.IntegerField()
    geomean = serializers.FloatField(allow_null=True)
    total = serializers.IntegerField()


class ColumnSerializer(serializers.Serializer):
    value = serializers.CharField()
    label = serializers.CharField()
    total = serializers.IntegerField()


class RowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(allow_null=True)
    team = serializers.CharField(source="team_name")
    team_slug = serializers.CharField()
    is_baseline = serializers.BooleanField()
    score = ScoreSerializer()
    categories = ScoreSerializer(many=True)
    reached_at = serializers.DateTimeField(allow_null=True)
    roofline = serializers.FloatField(allow_null=True)


class BoardSerializer(serializers.Serializer):
    profile = serializers.CharField()
    category = serializers.CharField(allow_null=True)
    columns = ColumnSerializer(many=True)
    rows = RowSerializer(many=True)


class ProblemResultSerializer(serializers.ModelSerializer):
    problem = serializers.CharField(source="problem.slug")
    flagged = serializers.BooleanField(source="is_flagged")

    class Meta:
        model = ProblemResult
        fields = [
            "problem",
            "status",
            "world_size",
            "message",
            "time_us",
            "ref_time_us",
            "speedup",
            "max_abs_err",
            "max_rel_err",
            "roofline",
            "flags",
            "flagged",
            "cases",
            "log",
        ]


class SubmissionSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    user = serializers.CharField(source="user.username")
    results = ProblemResultSerializer(many=True)

    class Meta:
        model = Submission
        fields = [
            "id",
            "team",
            "user",
            "bundle_name",
            "bundle_sha256",
            "profile",
            "problems",
            "status",
            "reason",
            "attempts",
            "created_at",
            "queued_at",
            "started_at",
            "finished_at",
            "host",
            "progress_done",
            "progress_total",
            "current_problem",
            "environment",
            "results",
        ]
