"""Shapes of the API's problems (portal.problems)."""

from __future__ import annotations

from rest_framework import serializers

from portal.problems.models import Problem


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
        fields = [*ProblemSerializer.Meta.fields, "public_cases", "reference_source"]
