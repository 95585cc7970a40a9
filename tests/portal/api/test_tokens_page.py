from __future__ import annotations

import pytest
from django.urls import reverse

from portal.api.models import ApiToken, token_digest
from portal.api.services import api_token_create

pytestmark = pytest.mark.django_db


def test_the_page_requires_login(client):
    response = client.get(reverse("tokens:list"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_without_a_team_it_sends_you_to_the_team_page(client, dana):
    client.force_login(dana)
    assert client.get(reverse("tokens:list"))["Location"] == reverse("accounts:team")


def test_the_team_page_links_to_it(client, alice):
    client.force_login(alice)
    assert reverse("tokens:list") in client.get(reverse("accounts:team")).content.decode()


def test_a_new_token_is_shown_once(client, alice):
    client.force_login(alice)
    response = client.post(reverse("tokens:list"), {"name": "laptop"})
    assert response.status_code == 201
    secret = response.context["secret"]
    token = ApiToken.objects.get()
    assert token.digest == token_digest(secret) and token.name == "laptop"
    assert secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    again = client.get(reverse("tokens:list")).content.decode()
    assert secret not in again
    assert "laptop" in again and f"{token.prefix}…" in again


def test_a_bad_name_is_a_400_with_the_reason(client, alice):
    client.force_login(alice)
    response = client.post(reverse("tokens:list"), {"name": "x" * 65})
    assert response.status_code == 400
    assert response.context["secret"] is None and not ApiToken.objects.exists()
    assert "at most 64 characters" in response.content.decode()


def test_the_list_shows_the_teams_active_tokens_only(client, alice, bob, charlie):
    api_token_create(user=bob, name="bob's ci")
    revoked, _ = api_token_create(user=alice, name="old laptop")
    revoked.revoked_at = revoked.created_at
    revoked.save()
    api_token_create(user=charlie, name="charlie's")
    client.force_login(alice)
    names = [t.name for t in client.get(reverse("tokens:list")).context["tokens"]]
    assert names == ["bob's ci"]


def revoke(client, token, method="post"):
    return getattr(client, method)(reverse("tokens:revoke", args=[token.pk]))


def test_a_member_revokes_their_token(client, alice):
    token, secret = api_token_create(user=alice, name="laptop")
    client.force_login(alice)
    response = revoke(client, token)
    assert response["Location"] == reverse("tokens:list")
    token.refresh_from_db()
    assert not token.is_active
    page = client.get(reverse("tokens:list")).content.decode()
    assert f"Token “laptop” ({token.prefix}…) revoked." in page


def test_a_member_cannot_revoke_a_teammates_token(client, alice, bob):
    token, _ = api_token_create(user=alice, name="alice's")
    client.force_login(bob)
    revoke(client, token)
    token.refresh_from_db()
    assert token.is_active
    assert "creator or the team" in client.get(reverse("tokens:list")).content.decode()


def test_an_outsider_gets_a_404(client, alice, charlie):
    token, _ = api_token_create(user=alice, name="alice's")
    client.force_login(charlie)
    assert revoke(client, token).status_code == 404
    token.refresh_from_db()
    assert token.is_active


def test_revoke_rejects_get(client, alice):
    token, _ = api_token_create(user=alice, name="laptop")
    client.force_login(alice)
    assert revoke(client, token, method="get").status_code == 405


def test_revoke_of_a_bad_id_is_a_404(client, alice):
    client.force_login(alice)
    assert client.post(reverse("tokens:revoke", args=[999999])).status_code == 404


def test_revoking_requires_login(client, alice):
    token, _ = api_token_create(user=alice, name="laptop")
    assert revoke(client, token).status_code == 302
    token.refresh_from_db()
    assert token.is_active


def test_the_page_rejects_other_methods(client, alice):
    client.force_login(alice)
    assert client.delete(reverse("tokens:list")).status_code == 405
