"""Writes of the API app: team API tokens."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from portal.accounts.models import Membership
from portal.accounts.selectors import team_of
from portal.api.models import PREFIX_CHARS, ApiToken, token_digest

TOKEN_NAME_MAX = 64
# A cap keeps a leaked session from minting tokens without end; revoked ones do not count.
MAX_ACTIVE_TOKENS_PER_USER = 20
# last_used_at is a hint for people cleaning up tokens, not an audit log: writing it on
# every request would double the writes of a polling CLI.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenError(Exception):
    """A token action that cannot be done; the message is meant for the user."""


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A new token for the user's team, and its secret: the only time the secret exists."""
    name = " ".join(name.split())
    if not name:
        raise TokenError("Give the token a name, e.g. the machine it will live on.")
    if len(name) > TOKEN_NAME_MAX:
        raise TokenError(f"A token's name has at most {TOKEN_NAME_MAX} characters.")
    team = team_of(user)
    if team is None:
        raise TokenError("Join or create a team first: a token acts for your team.")
    if ApiToken.objects.active().filter(user=user).count() >= MAX_ACTIVE_TOKENS_PER_USER:
        raise TokenError(
            f"You have {MAX_ACTIVE_TOKENS_PER_USER} active tokens; revoke one you no longer use."
        )
    secret = "pkb_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, team=team, name=name, prefix=secret[:PREFIX_CHARS], digest=token_digest(secret)
    )
    return token, secret


def api_token_can_revoke(*, token: ApiToken, user: User) -> bool:
    """Its creator, or an owner of its team."""
    if token.user_id == user.pk:
        return True
    return Membership.objects.filter(
        user=user, team_id=token.team_id, role=Membership.Role.OWNER
    ).exists()


def api_token_revoke(*, token: ApiToken, user: User) -> bool:
    """Revoke the token; False when it already was. Raises TokenError if not allowed."""
    if not api_token_can_revoke(token=token, user=user):
        raise TokenError("Only the token's creator or the team's owner can revoke it.")
    return bool(
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


def api_tokens_revoke_for_member(*, user_id: int, team_id: int) -> int:
    """Revoke the user's tokens for a team they are no longer in, for good: suspended
    tokens would work again if the person rejoined. Returns how many were revoked."""
    return ApiToken.objects.filter(
        user_id=user_id, team_id=team_id, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())


def api_token_touch(*, token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
