from __future__ import annotations

import pytest

from portal.accounts.models import Membership, Team
from portal.accounts.services import TeamError, team_create, team_join, team_leave

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


def test_an_owner_leaving_hands_the_team_to_the_next_member(alice, bob, team):
    team_leave(user=alice)
    assert not Membership.objects.filter(user=alice).exists()
    assert Membership.objects.get(user=bob).role == Membership.Role.OWNER
    assert Team.objects.filter(pk=team.pk).exists()


def test_the_last_member_leaving_keeps_the_team_and_its_history(alice, team):
    team_leave(user=alice)
    assert Team.objects.filter(pk=team.pk).exists()
    assert not team.memberships.exists()


def test_leaving_without_a_team_is_an_error(dana):
    with pytest.raises(TeamError, match="not in a team"):
        team_leave(user=dana)
