"""The owner's controls on the Team page: remove a member, hand over, new invite code."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.accounts.models import Membership
from portal.accounts.services import team_disqualify
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db

TEAM_URL = reverse("accounts:team")


def _remove(user) -> str:
    return reverse("accounts:team-remove-member", args=[user.pk])


def _transfer(user) -> str:
    return reverse("accounts:team-transfer", args=[user.pk])


INVITE_URL = reverse("accounts:team-invite")


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_owner_sees_the_controls_and_the_rule(client, alice, bob):
    client.force_login(alice)
    body = client.get(TEAM_URL).content.decode()
    assert _remove(bob) in body and _transfer(bob) in body and INVITE_URL in body
    assert _remove(alice) not in body
    assert "cannot leave while other members remain" in body


def test_a_member_sees_no_owner_controls(client, alice, bob):
    client.force_login(bob)
    body = client.get(TEAM_URL).content.decode()
    assert _remove(alice) not in body and INVITE_URL not in body


def test_the_owner_removes_a_member(client, alice, bob):
    client.force_login(alice)
    response = client.post(_remove(bob), follow=True)
    assert "bob is no longer in the team." in _messages(response)
    assert not Membership.objects.filter(user=bob).exists()


def test_the_owner_hands_the_team_over(client, alice, bob):
    client.force_login(alice)
    response = client.post(_transfer(bob), follow=True)
    assert "bob now owns the team." in _messages(response)
    assert Membership.objects.get(user=bob).role == Membership.Role.OWNER
    assert Membership.objects.get(user=alice).role == Membership.Role.MEMBER


def test_the_owner_makes_a_new_invite_code(client, alice, team):
    old = team.invite_code
    client.force_login(alice)
    response = client.post(INVITE_URL, follow=True)
    team.refresh_from_db()
    assert team.invite_code != old
    assert team.invite_code in response.content.decode()


@pytest.mark.parametrize("url", ["remove", "transfer", "invite"])
def test_a_member_is_refused_the_owner_actions(client, alice, bob, team, url):
    old = team.invite_code
    target = {"remove": _remove(alice), "transfer": _transfer(bob), "invite": INVITE_URL}[url]
    client.force_login(bob)
    response = client.post(target, follow=True)
    assert "Only the team's owner can do this." in _messages(response)
    team.refresh_from_db()
    assert team.invite_code == old
    assert Membership.objects.get(user=alice).role == Membership.Role.OWNER
    assert Membership.objects.filter(user=bob).exists()


@pytest.mark.parametrize("action", [_remove, _transfer])
def test_the_owner_cannot_reach_another_teams_member(client, alice, charlie, action):
    client.force_login(alice)
    response = client.post(action(charlie), follow=True)
    assert "This person is not in your team." in _messages(response)
    assert Membership.objects.get(user=charlie).role == Membership.Role.OWNER


@pytest.mark.parametrize("action", [_remove, _transfer])
def test_a_bad_member_id_is_a_message_not_a_crash(client, alice, action):
    client.force_login(alice)

    class Nobody:
        pk = 987654

    response = client.post(action(Nobody), follow=True)
    assert response.status_code == 200
    assert "This person is not in your team." in _messages(response)


def test_the_owner_is_told_to_hand_over_before_leaving(client, alice, bob):
    client.force_login(alice)
    response = client.post(reverse("accounts:team-leave"), follow=True)
    assert any("make another member the owner" in m for m in _messages(response))
    assert Membership.objects.filter(user=alice).exists()


@pytest.mark.parametrize("url", ["remove", "transfer", "invite"])
def test_the_owner_actions_require_login_and_post(client, alice, bob, url):
    target = {"remove": _remove(bob), "transfer": _transfer(bob), "invite": INVITE_URL}[url]
    response = client.post(target)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(alice)
    assert client.get(target).status_code == 405
    assert Membership.objects.filter(user=bob).exists()


def test_the_team_sees_its_disqualification_and_reason(client, alice, team):
    team_disqualify(team=team, reason="Timed only part of the work.")
    client.force_login(alice)
    body = client.get(TEAM_URL).content.decode()
    assert "This team is disqualified" in body
    assert "Timed only part of the work." in body


def test_the_team_sees_its_disqualified_submissions_with_reasons(client, alice, team):
    from portal.submissions.services import submission_disqualify

    kept = SubmissionFactory(team=team, user=alice, done=True)
    dropped = SubmissionFactory(team=team, user=alice, done=True, bundle_name="cached.zip")
    submission_disqualify(submission=dropped, reason="Replayed cached outputs.")
    client.force_login(alice)
    body = client.get(TEAM_URL).content.decode()
    assert "Replayed cached outputs." in body and "cached.zip" in body
    assert reverse("submissions:detail", args=[kept.pk]) not in body
    assert "This team is disqualified" not in body


def test_the_team_page_shows_the_submission_quota(client, alice, team, settings):
    settings.PKB_SUBMISSIONS_PER_DAY = 10
    SubmissionFactory(team=team, user=alice, done=True)
    client.force_login(alice)
    assert "1 of 10 ranked runs used in the last 24 hours" in client.get(TEAM_URL).content.decode()
