from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User

from portal.accounts.models import Membership, Team


def team_of(user: User | AnonymousUser) -> Team | None:
    """The user's team, or None (anonymous users and users without a team)."""
    if not user.is_authenticated:
        return None
    membership = Membership.objects.select_related("team").filter(user=user).first()
    return membership.team if membership else None


def team_members(team: Team) -> list[Membership]:
    return list(team.memberships.select_related("user").order_by("joined_at", "id"))


def email_in_use(email: str, *, other_than: User | None = None) -> bool:
    """Whether an account (other than `other_than`) uses this address, in any case: one
    address per account, so that a password reset by mail reaches one person."""
    users = get_user_model().objects.filter(email__iexact=email)
    if other_than is not None:
        users = users.exclude(pk=other_than.pk)
    return users.exists()
