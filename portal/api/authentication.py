"""`Authorization: Token <secret>` (or `Bearer <secret>`) for the API."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.api.models import ApiToken, token_digest
from portal.api.services import api_token_touch

KEYWORDS = (b"token", b"bearer")


class TeamTokenAuthentication(authentication.BaseAuthentication):
    """A team API token acts as the member who made it, while they are in that team."""

    def authenticate(self, request: Request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None  # not ours: session authentication may still apply
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: expected 'Token <secret>'."
            )
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = (
            ApiToken.objects.select_related("user", "user__membership", "team")
            .filter(digest=token_digest(secret))
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        # Leaving revokes a token (portal/api/signals.py); the membership is checked as
        # well, and first, so that the refusal says why.
        membership = getattr(token.user, "membership", None)  # None: in no team
        if membership is None or membership.team_id != token.team_id:
            raise exceptions.AuthenticationFailed(
                f"This token ({token.prefix}…) no longer works: its user left its team."
            )
        if not token.is_active:
            raise exceptions.AuthenticationFailed(
                f"This token ({token.prefix}…) was revoked; create a new one on your team page."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This token's user account is disabled.")
        api_token_touch(token=token)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Makes a missing or bad credential a 401 (with this challenge), not a 403.
        return 'Token realm="api"'
