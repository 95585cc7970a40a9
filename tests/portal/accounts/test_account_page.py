"""The account page: a signed-in user sees their username, email and team, and adds,
changes or removes their email with their current password; the address they had hears of
the change by mail."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from portal.accounts.notifications import EMAIL_CHANGED_SUBJECT
from tests.portal.conftest import PASSWORD

pytestmark = pytest.mark.django_db

ACCOUNT = reverse("accounts:account")


@pytest.fixture
def with_email(alice):
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    return alice


@pytest.fixture
def post(client, django_capture_on_commit_callbacks):
    """POSTs the form, then runs what waits for the commit (the mail), as a request would
    outside the test's transaction."""

    def send(email: str, password: str = PASSWORD):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(ACCOUNT, {"email": email, "password": password})

    return send


def email_of(user) -> str:
    return get_user_model().objects.get(pk=user.pk).email


def test_it_shows_the_username_email_and_team(client, with_email):
    client.force_login(with_email)
    page = client.get(ACCOUNT).content.decode()
    assert '<dd id="account-username">alice</dd>' in page
    assert '<dd id="account-email">alice@example.org</dd>' in page
    assert "Alice&#x27;s Kernels</a></dd>" in page
    assert 'value="alice@example.org"' in page  # the form starts from the present address
    assert "Change your email" in page


def test_a_user_without_team_or_email_is_told_how_to_get_them(client, dana):
    client.force_login(dana)
    page = client.get(ACCOUNT).content.decode()
    assert "create or join one</a>" in page
    assert '<dd id="account-email"><span class="muted">none</span></dd>' in page
    assert "Add an email" in page


def test_the_header_links_the_username_to_the_account_page(client, alice):
    client.force_login(alice)
    page = client.get(reverse("leaderboard:home")).content.decode()
    assert f'<a class="nav-user" href="{ACCOUNT}"' in page
    page = client.get(ACCOUNT).content.decode()
    assert 'title="Your account: email and team" aria-current="page">alice</a>' in page
    assert f'href="{reverse("accounts:team")}" aria-current' not in page


def test_an_email_is_changed_and_the_old_address_told(client, post, with_email):
    client.force_login(with_email)
    response = post("Alice.New@Example.ORG")
    assert response.status_code == 302 and response["Location"] == ACCOUNT
    # The domain lower-cased, as at sign-up (Django's normalisation).
    assert email_of(with_email) == "Alice.New@example.org"
    [sent] = mail.outbox
    assert sent.to == ["alice@example.org"] and sent.subject == EMAIL_CHANGED_SUBJECT
    assert "account alice" in sent.body and "changed to another address" in sent.body
    assert "Alice.New" not in sent.body  # the old address is not told the new one
    page = client.get(ACCOUNT).content.decode()
    assert "Your email is now Alice.New@example.org." in page
    assert "A note of the change went to alice@example.org." in page


def test_a_first_email_is_added_and_nobody_else_mailed(client, post, alice):
    client.force_login(alice)
    assert post("alice@example.org").status_code == 302
    assert email_of(alice) == "alice@example.org"
    assert mail.outbox == []
    assert "Your email is now alice@example.org." in client.get(ACCOUNT).content.decode()


def test_an_email_is_removed_and_the_old_address_told(client, post, with_email):
    client.force_login(with_email)
    assert post("").status_code == 302
    assert email_of(with_email) == ""
    [sent] = mail.outbox
    assert sent.to == ["alice@example.org"] and "was removed" in sent.body
    assert "Your account has no email now." in client.get(ACCOUNT).content.decode()


def test_a_change_of_case_alone_mails_nobody(client, post, with_email):
    client.force_login(with_email)
    assert post("Alice@example.org").status_code == 302
    assert email_of(with_email) == "Alice@example.org" and mail.outbox == []


def test_an_address_of_another_account_is_refused_in_any_case(client, post, alice, bob):
    bob.email = "bob@example.org"
    bob.save(update_fields=["email"])
    client.force_login(alice)
    response = post("BOB@Example.org")
    assert response.status_code == 400
    page = response.content.decode()
    assert "An account already uses this address." in page
    assert 'value="BOB@Example.org"' in page  # what they typed, to correct it
    assert email_of(alice) == "" and mail.outbox == []


def test_a_wrong_password_changes_nothing(client, post, with_email):
    client.force_login(with_email)
    response = post("alice@elsewhere.org", password="not-my-password")
    assert response.status_code == 400
    page = response.content.decode()
    assert "This is not your current password." in page
    assert 'value="alice@elsewhere.org"' in page
    assert "not-my-password" not in page  # a password is never sent back
    assert email_of(with_email) == "alice@example.org" and mail.outbox == []


@pytest.mark.parametrize("typed", ["alice", "alice@", "alice@@example.org", "a b@example.org"])
def test_a_malformed_address_is_refused(client, post, with_email, typed):
    client.force_login(with_email)
    response = post(typed)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Enter a valid email address." in page and f'value="{typed}"' in page
    assert email_of(with_email) == "alice@example.org" and mail.outbox == []


def test_the_same_address_again_is_said_to_change_nothing(client, post, with_email):
    client.force_login(with_email)
    response = post("alice@example.org")
    assert response.status_code == 400
    assert "This is your email already." in response.content.decode()
    assert mail.outbox == []


def test_a_mail_server_that_refuses_costs_the_notice_not_the_change(
    client, post, with_email, settings, caplog
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 1  # nothing listens there
    client.force_login(with_email)
    assert post("alice@elsewhere.org").status_code == 302
    assert email_of(with_email) == "alice@elsewhere.org"
    assert "the 'email changed' mail was not sent" in caplog.text


@pytest.mark.parametrize("method", ["get", "post"])
def test_it_requires_login(client, method):
    response = getattr(client, method)(ACCOUNT)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={ACCOUNT}"


def test_it_rejects_wrong_method(client, alice):
    client.force_login(alice)
    assert client.put(ACCOUNT).status_code == 405
