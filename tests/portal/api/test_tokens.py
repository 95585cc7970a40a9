from __future__ import annotations

import hashlib
from importlib import import_module

import pytest
from django.apps import apps
from django.urls import reverse
from rest_framework.test import APIClient

from portal.accounts.models import Membership
from portal.accounts.services import team_join, team_leave, team_remove_member
from portal.api.models import ApiToken
from portal.api.services import (
    MAX_ACTIVE_TOKENS_PER_USER,
    TokenError,
    api_token_create,
    api_token_revoke,
)
from tests.portal.api.conftest import token_client

pytestmark = pytest.mark.django_db


def with_header(value: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=value)
    return client


def test_it_stores_only_a_hash_and_a_short_prefix(alice, team):
    token, secret = api_token_create(user=alice, name="  my   laptop ")
    stored = ApiToken.objects.get(pk=token.pk)
    assert secret.startswith("pkb_") and len(secret) > 40
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert stored.prefix == secret[:12]
    assert secret not in {stored.name, stored.prefix, stored.digest}
    assert (stored.name, stored.team, stored.user) == ("my laptop", team, alice)


def test_each_token_gets_a_fresh_secret(alice):
    secrets = {api_token_create(user=alice, name="ci")[1] for _ in range(3)}
    assert len(secrets) == 3


@pytest.mark.parametrize(
    "name,message", [("   ", "Give the token a name"), ("x" * 65, "at most 64")]
)
def test_it_refuses_a_bad_name(alice, name, message):
    with pytest.raises(TokenError, match=message):
        api_token_create(user=alice, name=name)


def test_it_needs_a_team(dana):
    with pytest.raises(TokenError, match="Join or create a team"):
        api_token_create(user=dana, name="laptop")


def test_it_caps_active_tokens_per_user(alice):
    for i in range(MAX_ACTIVE_TOKENS_PER_USER):
        api_token_create(user=alice, name=f"t{i}")
    with pytest.raises(TokenError, match="revoke one"):
        api_token_create(user=alice, name="one more")
    api_token_revoke(token=ApiToken.objects.first(), user=alice)
    api_token_create(user=alice, name="one more")


def test_a_token_acts_as_its_creator_within_the_team(alice):
    token, secret = api_token_create(user=alice, name="laptop")
    response = with_header(f"Token {secret}").get(reverse("api:me"))
    assert response.status_code == 200
    assert response.json() == {
        "username": "alice",
        "is_staff": False,
        "team": "Alice's Kernels",
        "team_slug": "alices-kernels",
        "token": {
            "name": "laptop",
            "prefix": token.prefix,
            "created_at": response.json()["token"]["created_at"],
        },
    }


def test_the_bearer_keyword_works_too(alice):
    _, secret = api_token_create(user=alice, name="laptop")
    assert with_header(f"Bearer {secret}").get(reverse("api:me")).json()["username"] == "alice"


def test_a_session_works_without_a_token(client, alice):
    client.force_login(alice)
    data = client.get(reverse("api:me")).json()
    assert (data["username"], data["token"]) == ("alice", None)


def test_it_records_when_a_token_was_last_used(alice):
    token, secret = api_token_create(user=alice, name="laptop")
    assert token.last_used_at is None
    with_header(f"Token {secret}").get(reverse("api:problems"))
    token.refresh_from_db()
    assert token.last_used_at is not None


def assert_refused(response, message: str) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert message in response.json()["detail"]


def test_an_unknown_token_is_a_401(db):
    assert_refused(with_header("Token pkb_nope").get(reverse("api:problems")), "Invalid token.")


@pytest.mark.parametrize("header", ["Token", "Token a b", "Bearer"])
def test_a_malformed_header_is_a_401(db, header):
    assert_refused(with_header(header).get(reverse("api:problems")), "Malformed")


def test_a_revoked_token_is_a_401_that_says_so(alice):
    token, secret = api_token_create(user=alice, name="laptop")
    assert api_token_revoke(token=token, user=alice)
    response = with_header(f"Token {secret}").get(reverse("api:me"))
    assert_refused(response, f"This token ({token.prefix}…) was revoked")


def test_a_token_stops_working_when_its_user_leaves_the_team(alice, bob):
    _, secret = api_token_create(user=bob, name="laptop")
    team_leave(user=bob)
    assert_refused(with_header(f"Token {secret}").get(reverse("api:me")), "left its team")


def test_a_disabled_user_token_is_a_401(alice):
    _, secret = api_token_create(user=alice, name="laptop")
    alice.is_active = False
    alice.save()
    assert_refused(with_header(f"Token {secret}").get(reverse("api:me")), "disabled")


def test_no_credentials_is_a_401_with_a_challenge(db):
    response = APIClient().get(reverse("api:me"))
    assert_refused(response, "Authentication credentials were not provided.")


def test_a_member_revokes_their_own_token_not_a_teammates(alice, bob):
    alices, _ = api_token_create(user=alice, name="alice's")
    bobs, _ = api_token_create(user=bob, name="bob's")
    with pytest.raises(TokenError, match="creator or the team's owner"):
        api_token_revoke(token=alices, user=bob)
    assert api_token_revoke(token=bobs, user=bob)
    assert not api_token_revoke(token=bobs, user=bob)  # already revoked


def test_the_owner_revokes_any_token_of_the_team(alice, bob):
    bobs, _ = api_token_create(user=bob, name="bob's")
    assert api_token_revoke(token=bobs, user=alice)


def test_a_token_needs_no_csrf_token_to_write(alice, submission_bundle):
    client = token_client(alice)
    client.handler.enforce_csrf_checks = True
    response = client.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 201


def test_a_session_write_needs_the_csrf_token(alice, submission_bundle):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(reverse("api:submissions"), {"bundle": submission_bundle})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_a_token_of_a_member_who_left_stays_revoked_when_they_rejoin(alice, bob, team):
    token, secret = api_token_create(user=bob, name="laptop")
    team_leave(user=bob)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    team_join(user=bob, invite_code=team.invite_code)
    assert_refused(with_header(f"Token {secret}").get(reverse("api:me")), "was revoked")


def test_a_removed_members_tokens_are_revoked_and_others_kept(alice, bob, team):
    _, bobs = api_token_create(user=bob, name="laptop")
    _, alices = api_token_create(user=alice, name="laptop")
    team_remove_member(owner=alice, member_id=bob.pk)
    team_join(user=bob, invite_code=team.invite_code)
    assert_refused(with_header(f"Token {bobs}").get(reverse("api:me")), "was revoked")
    assert with_header(f"Token {alices}").get(reverse("api:me")).status_code == 200


def test_a_membership_deleted_in_the_admin_revokes_the_tokens_too(alice, bob, team):
    token, _ = api_token_create(user=bob, name="laptop")
    Membership.objects.filter(user=bob).delete()  # what the team admin's inline does
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_the_migration_revokes_tokens_left_suspended_before(alice, bob, team):
    token, _ = api_token_create(user=bob, name="laptop")
    kept, _ = api_token_create(user=alice, name="laptop")
    # A departure from before the revocation existed: the membership gone, the token not.
    Membership.objects.filter(user=bob)._raw_delete(Membership.objects.db)
    migration = import_module("portal.api.migrations.0002_revoke_departed_members_tokens")
    migration.revoke(apps, None)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert ApiToken.objects.get(pk=kept.pk).revoked_at is None
