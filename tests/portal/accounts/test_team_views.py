from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from portal.accounts.models import Membership

pytestmark = pytest.mark.django_db

TEAM_URL = reverse("accounts:team")


def test_signup_creates_the_user_and_logs_in(client):
    response = client.post(
        reverse("accounts:signup"),
        {"username": "erin", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase"},
    )
    assert response.status_code == 302
    assert response["Location"] == TEAM_URL
    assert get_user_model().objects.filter(username="erin").exists()
    assert client.get(TEAM_URL).context["user"].username == "erin"


def test_signup_shows_form_errors(client):
    response = client.post(
        reverse("accounts:signup"), {"username": "erin", "password1": "a", "password2": "b"}
    )
    assert response.status_code == 200
    assert not get_user_model().objects.filter(username="erin").exists()


def test_signup_rejects_wrong_method(client):
    assert client.put(reverse("accounts:signup")).status_code == 405


def test_login_and_logout(client, alice):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "correct-horse-battery"}
    )
    assert response.status_code == 302
    assert client.get(TEAM_URL).status_code == 200
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(TEAM_URL).status_code == 302


def test_team_page_requires_login(client):
    response = client.get(TEAM_URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_team_page_shows_members_and_the_invite_code_to_members(client, alice, bob, team):
    client.force_login(bob)
    page = client.get(TEAM_URL).content.decode()
    assert "alice" in page and "bob" in page
    assert team.invite_code in page


def test_team_page_offers_create_and_join_without_a_team(client, dana, team):
    client.force_login(dana)
    page = client.get(TEAM_URL).content.decode()
    assert "Create a team" in page and "Join a team" in page
    assert team.invite_code not in page


def test_team_page_rejects_wrong_method(client, alice):
    client.force_login(alice)
    assert client.post(TEAM_URL).status_code == 405


def test_create_team_form(client, dana):
    client.force_login(dana)
    response = client.post(reverse("accounts:team-create"), {"name": "Ring Masters"})
    assert response.status_code == 302
    assert dana.membership.team.name == "Ring Masters"


def test_create_team_form_shows_the_service_error(client, alice):
    client.force_login(alice)
    response = client.post(reverse("accounts:team-create"), {"name": "Another"}, follow=True)
    assert response.redirect_chain == [(TEAM_URL, 302)]
    assert "already in team" in response.content.decode()


def test_join_form_shows_a_bad_code(client, dana):
    client.force_login(dana)
    response = client.post(reverse("accounts:team-join"), {"invite_code": "nope"})
    assert response.status_code == 400
    assert "No team has this invite code" in response.content.decode()


def test_join_form_joins(client, dana, team):
    client.force_login(dana)
    response = client.post(reverse("accounts:team-join"), {"invite_code": team.invite_code})
    assert response.status_code == 302
    assert Membership.objects.get(user=dana).team == team


def test_leave(client, bob):
    client.force_login(bob)
    assert client.post(reverse("accounts:team-leave")).status_code == 302
    assert not Membership.objects.filter(user=bob).exists()


@pytest.mark.parametrize(
    "name", ["accounts:team-create", "accounts:team-join", "accounts:team-leave"]
)
def test_team_actions_require_login_and_post(client, dana, name):
    url = reverse(name)
    assert client.post(url).status_code == 302  # to the login page
    client.force_login(dana)
    assert client.get(url).status_code == 405
