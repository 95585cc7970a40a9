from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from portal.accounts.models import Membership, Team, new_invite_code
from portal.accounts.notifications import email_changed_mail
from portal.accounts.selectors import email_in_use


class TeamError(Exception):
    """A team action that cannot be done; the message is meant for the user."""


class AccountError(Exception):
    """A change to one's account that cannot be made; the message is meant for the user."""


EMAIL_IN_USE = "An account already uses this address."


def user_change_email(*, user: User, email: str) -> None:
    """Give the user another email, or none (""). The address they had, if another, is
    told once the change is committed: the one way its owner learns of a change that was
    not theirs (a mail to the new address would reach whoever made it)."""
    email = User.objects.normalize_email(email.strip())
    if email and email_in_use(email, other_than=user):
        raise AccountError(EMAIL_IN_USE)
    old_email = user.email
    user.email = email
    user.save(update_fields=["email"])
    # Case alone changes no mailbox: nothing to tell.
    if old_email and old_email.lower() != email.lower():
        transaction.on_commit(lambda: email_changed_mail(user=user, old_email=old_email))


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
    """Leave the user's team; the team and its submissions stay.

    An owner cannot leave while other members remain: they hand the team over first
    (team_transfer_ownership), so that a team is never left without someone in charge.
    """
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(user=user).first()
        if membership is None:
            raise TeamError("You are not in a team.")
        if membership.role == Membership.Role.OWNER:
            others = Membership.objects.filter(team_id=membership.team_id).exclude(pk=membership.pk)
            if others.exists():
                raise TeamError(
                    "You own this team: make another member the owner before you leave."
                )
        membership.delete()


def _owner_membership(user: User) -> Membership:
    """The user's membership, locked, when they own their team; TeamError otherwise."""
    membership = (
        Membership.objects.select_for_update().select_related("team").filter(user=user).first()
    )
    if membership is None:
        raise TeamError("You are not in a team.")
    if membership.role != Membership.Role.OWNER:
        raise TeamError("Only the team's owner can do this.")
    return membership


def _member_of(team_id: int, user_id: int) -> Membership:
    membership = (
        Membership.objects.select_for_update().filter(team_id=team_id, user_id=user_id).first()
    )
    if membership is None:
        raise TeamError("This person is not in your team.")
    return membership


def team_remove_member(*, owner: User, member_id: int) -> User:
    """The owner removes a member (not themselves: owners leave); returns who was removed."""
    with transaction.atomic():
        own = _owner_membership(owner)
        if member_id == owner.pk:
            raise TeamError("You cannot remove yourself; hand the team over, then leave.")
        removed = _member_of(own.team_id, member_id)
        removed.delete()
    return removed.user


def team_transfer_ownership(*, owner: User, member_id: int) -> User:
    """The owner makes another member the owner and becomes a member."""
    with transaction.atomic():
        own = _owner_membership(owner)
        if member_id == owner.pk:
            raise TeamError("You already own this team.")
        successor = _member_of(own.team_id, member_id)
        successor.role = Membership.Role.OWNER
        successor.save(update_fields=["role"])
        own.role = Membership.Role.MEMBER
        own.save(update_fields=["role"])
    return successor.user


def team_regenerate_invite(*, owner: User) -> Team:
    """A new invite code for the owner's team: the old one stops working at once."""
    with transaction.atomic():
        team = _owner_membership(owner).team
        team.invite_code = new_invite_code()
        team.save(update_fields=["invite_code"])
    return team


def team_disqualify(*, team: Team, reason: str) -> bool:
    """An admin keeps every result of the team off the ranking; the team sees the reason.

    Returns False when the team was disqualified already (its reason is then updated)."""
    reason = reason.strip()
    if not reason:
        raise TeamError("A disqualification needs a reason that the team can read.")
    fresh = Team.objects.filter(pk=team.pk, disqualified_at__isnull=True).update(
        disqualified_at=timezone.now(), disqualification_reason=reason
    )
    if not fresh:
        Team.objects.filter(pk=team.pk).update(disqualification_reason=reason)
    return bool(fresh)


def team_reinstate(*, team: Team) -> bool:
    """Undo a team's disqualification; False when it was not disqualified."""
    return bool(
        Team.objects.filter(pk=team.pk, disqualified_at__isnull=False).update(
            disqualified_at=None, disqualification_reason=""
        )
    )
