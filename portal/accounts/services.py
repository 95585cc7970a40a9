from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from portal.accounts.models import Membership, Team


class TeamError(Exception):
    """A team action that cannot be done; the message is meant for the user."""


def _unique_slug(name: str) -> str:
    base = slugify(name)[:70] or "team"
    slug, n = base, 1
    while Team.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def _check_free(user: User) -> None:
    membership = Membership.objects.select_related("team").filter(user=user).first()
    if membership is not None:
        raise TeamError(f"You are already in team {membership.team.name}; leave it first.")


def team_create(*, owner: User, name: str) -> Team:
    name = name.strip()
    if not name:
        raise TeamError("A team needs a name.")
    _check_free(owner)
    if Team.objects.filter(name__iexact=name).exists():
        raise TeamError(f"The name {name!r} is taken.")
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, slug=_unique_slug(name))
            Membership.objects.create(user=owner, team=team, role=Membership.Role.OWNER)
    except IntegrityError:
        # Lost a race with another request for the same name or the same user.
        raise TeamError(f"The name {name!r} is taken, or you just joined a team.") from None
    return team


def team_join(*, user: User, invite_code: str) -> Team:
    team = Team.objects.filter(invite_code=invite_code.strip()).first()
    if team is None:
        raise TeamError("No team has this invite code.")
    _check_free(user)
    try:
        with transaction.atomic():
            Membership.objects.create(user=user, team=team, role=Membership.Role.MEMBER)
    except IntegrityError:
        raise TeamError("You just joined a team.") from None
    return team


def team_leave(*, user: User) -> None:
    """Leave the user's team. The team and its submissions stay; an owner hands over."""
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(user=user).first()
        if membership is None:
            raise TeamError("You are not in a team.")
        membership.delete()
        if membership.role == Membership.Role.OWNER:
            successor = Membership.objects.filter(team_id=membership.team_id).first()
            if successor is not None:
                successor.role = Membership.Role.OWNER
                successor.save(update_fields=["role"])
