from __future__ import annotations

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
