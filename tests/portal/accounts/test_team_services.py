from __future__ import annotations

import pytest

from portal.accounts.models import Membership, Team
from portal.accounts.services import (
    TeamError,
    team_create,
    team_disqualify,
    team_join,
    team_leave,
    team_regenerate_invite,
    team_reinstate,
    team_remove_member,
    team_transfer_ownership,
)
from tests.portal.factories import TeamFactory

pytestmark = pytest.mark.django_db


def test_it_creates_a_team_with_its_owner(dana):
    team = team_create(owner=dana, name="  Fast Fabric ")
    assert team.name == "Fast Fabric"
    assert team.slug == "fast-fabric"
    assert len(team.invite_code) >= 16
    assert dana.membership.team == team
    assert dana.membership.role == Membership.Role.OWNER


def test_it_refuses_a_taken_name_whatever_its_case(team, dana):
    with pytest.raises(TeamError, match="taken"):
        team_create(owner=dana, name="alice's kernels")
    assert not Membership.objects.filter(user=dana).exists()


def test_it_refuses_a_second_team_for_a_member(alice):
    with pytest.raises(TeamError, match="already in team Alice's Kernels"):
        team_create(owner=alice, name="Another")
    assert Team.objects.count() == 1


def test_it_refuses_a_blank_name(dana):
    with pytest.raises(TeamError, match="needs a name"):
        team_create(owner=dana, name="   ")


def test_slugs_stay_unique_when_names_differ_only_in_punctuation(dana, db):
    from tests.portal.factories import UserFactory

    first = team_create(owner=dana, name="Ring All")
    second = team_create(owner=UserFactory(), name="Ring-All")
    assert {first.slug, second.slug} == {"ring-all", "ring-all-2"}


def test_it_joins_with_the_invite_code(team, dana):
    assert team_join(user=dana, invite_code=f" {team.invite_code} ") == team
    assert dana.membership.role == Membership.Role.MEMBER


def test_it_rejects_a_bad_invite_code(team, dana):
    with pytest.raises(TeamError, match="No team has this invite code"):
        team_join(user=dana, invite_code="not-a-code")
    assert not Membership.objects.filter(user=dana).exists()


def test_a_member_cannot_join_another_team(charlie, team):
    with pytest.raises(TeamError, match="already in team Charlie Ltd"):
        team_join(user=charlie, invite_code=team.invite_code)


def test_an_owner_cannot_leave_while_members_remain(alice, bob, team):
    with pytest.raises(TeamError, match="make another member the owner"):
        team_leave(user=alice)
    assert Membership.objects.get(user=alice).role == Membership.Role.OWNER


def test_an_owner_leaves_after_handing_the_team_over(alice, bob, team):
    team_transfer_ownership(owner=alice, member_id=bob.pk)
    team_leave(user=alice)
    assert not Membership.objects.filter(user=alice).exists()
    assert Membership.objects.get(user=bob).role == Membership.Role.OWNER
    assert Team.objects.filter(pk=team.pk).exists()


def test_a_member_leaves_without_asking(alice, bob, team):
    team_leave(user=bob)
    assert list(team.memberships.values_list("user__username", flat=True)) == ["alice"]


def test_the_last_member_leaving_keeps_the_team_and_its_history(alice, team):
    team_leave(user=alice)
    assert Team.objects.filter(pk=team.pk).exists()
    assert not team.memberships.exists()


def test_leaving_without_a_team_is_an_error(dana):
    with pytest.raises(TeamError, match="not in a team"):
        team_leave(user=dana)


def test_the_owner_removes_a_member(alice, bob, team):
    assert team_remove_member(owner=alice, member_id=bob.pk) == bob
    assert not Membership.objects.filter(user=bob).exists()


def test_a_member_cannot_remove_anyone(alice, bob):
    with pytest.raises(TeamError, match="Only the team's owner"):
        team_remove_member(owner=bob, member_id=alice.pk)
    assert Membership.objects.filter(user=alice).exists()


def test_the_owner_cannot_remove_someone_of_another_team(alice, charlie):
    with pytest.raises(TeamError, match="not in your team"):
        team_remove_member(owner=alice, member_id=charlie.pk)
    assert Membership.objects.filter(user=charlie).exists()


def test_the_owner_cannot_remove_themselves(alice, bob):
    with pytest.raises(TeamError, match="cannot remove yourself"):
        team_remove_member(owner=alice, member_id=alice.pk)


def test_a_member_cannot_take_ownership(alice, bob):
    with pytest.raises(TeamError, match="Only the team's owner"):
        team_transfer_ownership(owner=bob, member_id=bob.pk)
    assert Membership.objects.get(user=alice).role == Membership.Role.OWNER


def test_ownership_goes_only_to_a_teammate(alice, charlie):
    with pytest.raises(TeamError, match="not in your team"):
        team_transfer_ownership(owner=alice, member_id=charlie.pk)


def test_a_new_invite_code_retires_the_old_one(alice, team, dana):
    old = team.invite_code
    assert team_regenerate_invite(owner=alice).invite_code != old
    with pytest.raises(TeamError, match="No team has this invite code"):
        team_join(user=dana, invite_code=old)
    team.refresh_from_db()
    assert team_join(user=dana, invite_code=team.invite_code) == team


def test_only_the_owner_regenerates_the_invite_code(alice, bob, team):
    old = team.invite_code
    with pytest.raises(TeamError, match="Only the team's owner"):
        team_regenerate_invite(owner=bob)
    team.refresh_from_db()
    assert team.invite_code == old


def test_a_team_is_disqualified_with_a_reason_and_reinstated(team):
    assert team_disqualify(team=team, reason=" Replayed cached outputs. ")
    team.refresh_from_db()
    assert team.is_disqualified
    assert team.disqualification_reason == "Replayed cached outputs."
    assert not team_disqualify(team=team, reason="Patched the timer.")  # already: reason updated
    team.refresh_from_db()
    assert team.disqualification_reason == "Patched the timer."
    assert team_reinstate(team=team)
    team.refresh_from_db()
    assert (team.disqualified_at, team.disqualification_reason) == (None, "")
    assert not team_reinstate(team=team)


def test_a_disqualification_needs_a_reason():
    team = TeamFactory()
    with pytest.raises(TeamError, match="needs a reason"):
        team_disqualify(team=team, reason="  ")
    team.refresh_from_db()
    assert not team.is_disqualified
