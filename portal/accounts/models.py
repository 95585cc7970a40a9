from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower


def new_invite_code() -> str:
    return secrets.token_urlsafe(12)


class TeamQuerySet(models.QuerySet["Team"]):
    def with_member_count(self) -> TeamQuerySet:
        return self.annotate(member_count=models.Count("memberships"))

    def in_good_standing(self) -> TeamQuerySet:
        return self.filter(disqualified_at__isnull=True)


class Team(models.Model):
    name = models.CharField(max_length=64)
    slug = models.SlugField(max_length=80, unique=True)
    invite_code = models.CharField(max_length=32, unique=True, default=new_invite_code)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by an admin: none of the team's results rank; the team sees the reason.
    disqualified_at = models.DateTimeField(null=True, blank=True)
    disqualification_reason = models.TextField(blank=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(Lower("name"), name="team_name_unique_ci"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_disqualified(self) -> bool:
        return self.disqualified_at is not None


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"

    # One-to-one: a user is in at most one team, which is the team their submissions count for.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["joined_at", "id"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
