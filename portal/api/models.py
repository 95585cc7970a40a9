"""Team API tokens: the secret is shown once; only its SHA-256 digest is stored."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

from portal.accounts.models import Team

# "pkb_" + 8 characters: enough to tell a team's tokens apart in a list, far too few to
# guess the rest (the secret carries 256 random bits after it).
PREFIX_CHARS = 12


def token_digest(secret: str) -> str:
    # A plain hash suffices: the secret is random and long, so no dictionary or brute force
    # applies, and a fast hash keeps every API request cheap.
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)

    def for_team(self, team: Team) -> ApiTokenQuerySet:
        return self.filter(team=team)


class ApiToken(models.Model):
    """Acts as `user` within `team`: it stops working when the user leaves the team."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64)
    prefix = models.CharField(max_length=PREFIX_CHARS)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
