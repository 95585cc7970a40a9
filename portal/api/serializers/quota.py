"""Shapes of the API's quota: a team's runs per mode and window (portal.submissions.quotas)."""

from __future__ import annotations

from rest_framework import serializers

from portal.submissions.models import Submission


class QuotaWindowSerializer(serializers.Serializer):
    window_s = serializers.IntegerField(source="seconds", help_text="3600 or 86400.")
    name = serializers.CharField(help_text='"in the last hour", "in the last 24 hours"')
    used = serializers.IntegerField(
        help_text="Runs of the mode kept in the window; a run that failed through the "
        "platform's fault does not count."
    )
    limit = serializers.IntegerField()
    next_at = serializers.DateTimeField(
        allow_null=True, help_text="When the next slot frees, while the window is full."
    )


class ModeQuotaSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=Submission.Mode.choices)
    windows = QuotaWindowSerializer(many=True, help_text="The windows with a limit.")
    summary = serializers.CharField(help_text='"3 of 20 ranked runs used in the last 24 hours"')
    refusal = serializers.CharField(
        allow_null=True, help_text="Why a run of this mode would be refused now; null: welcome."
    )


class QuotaSerializer(serializers.Serializer):
    modes = ModeQuotaSerializer(many=True)
    active = serializers.IntegerField(
        help_text="The team's runs queued or running now, its entries' samples included."
    )
    active_limit = serializers.IntegerField(help_text="Of all modes together.")
    entries = serializers.IntegerField(help_text="Model and agent entries the team registered.")
    entries_limit = serializers.IntegerField(help_text="PKB_MAX_ENTRIES_PER_TEAM.")
