"""Shapes of the API's teams, members and the caller (portal.accounts)."""

from __future__ import annotations

from rest_framework import serializers

from portal.accounts.models import Membership, Team


class TeamSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:team", lookup_field="slug")
    html_url = serializers.HyperlinkedIdentityField(
        view_name="leaderboard:team", lookup_field="slug"
    )
    member_count = serializers.IntegerField()

    class Meta:
        model = Team
        fields = ["slug", "url", "html_url", "name", "member_count", "created_at"]


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role", "joined_at"]


class TeamDetailSerializer(TeamSerializer):
    members = MemberSerializer(source="memberships", many=True)

    class Meta(TeamSerializer.Meta):
        fields = [*TeamSerializer.Meta.fields, "members"]


class OwnTeamSerializer(TeamDetailSerializer):
    """What members see of their own team: the invite code too, as on the Team page."""

    class Meta(TeamDetailSerializer.Meta):
        fields = [*TeamDetailSerializer.Meta.fields, "invite_code"]


class TokenInfoSerializer(serializers.Serializer):
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()
    team = serializers.CharField(allow_null=True)
    team_slug = serializers.CharField(allow_null=True)
    token = TokenInfoSerializer(allow_null=True, help_text="The token of this request, if any.")
