"""Sign-up takes an optional email; with it, a forgotten password can be reset by mail
(Django's views, the site's pages)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

pytestmark = pytest.mark.django_db

SIGNUP = reverse("accounts:signup")
PASSWORD = "a-long-kernel-password"


def _sign_up(client, username: str, email: str = ""):
    return client.post(
        SIGNUP,
        {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD},
    )


def test_sign_up_keeps_the_email_given(client):
    response = _sign_up(client, "dora", "Dora@Example.org")
    assert response.status_code == 302 and response["Location"] == reverse("accounts:team")
    # The domain lower-cased (Django's normalisation), the local part as given.
    assert get_user_model().objects.get(username="dora").email == "Dora@example.org"


def test_the_email_is_optional(client):
    page = client.get(SIGNUP).content.decode()
    assert 'name="email"' in page and "Optional. For mail when your team" in page
    assert _sign_up(client, "eve").status_code == 302
    assert get_user_model().objects.get(username="eve").email == ""


def test_an_address_already_in_use_is_refused(client, alice):
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    response = _sign_up(client, "mallory", "ALICE@example.org")
    assert response.status_code == 200
    assert "An account already uses this address." in response.content.decode()
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_the_login_page_links_to_the_password_reset(client):
    page = client.get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in page and "Forgot your password?" in page


def test_a_password_is_reset_through_the_mailed_link(client):
    _sign_up(client, "dora", "dora@example.org")
    client.logout()
    response = client.post(reverse("password_reset"), {"email": "dora@example.org"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    [sent] = mail.outbox
    assert sent.to == ["dora@example.org"]
    assert sent.subject == "Reset your password on Multi-GPU Kernel Bench"
    [link] = re.findall(r"http://testserver(/accounts/password-reset/\S+/)", sent.body)
    form = client.get(link, follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "another-long-password", "new_password2": "another-long-password"},
    )
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    assert client.login(username="dora", password="another-long-password")
    assert "This link no longer works" in client.get(link, follow=True).content.decode()


def test_an_unknown_address_sends_nothing_and_says_the_same(client, alice):
    response = client.post(reverse("password_reset"), {"email": "nobody@example.org"}, follow=True)
    assert "If an account uses that address" in response.content.decode()
    assert mail.outbox == []


@pytest.mark.parametrize(
    "name", ["password_reset", "password_reset_done", "password_reset_complete"]
)
def test_the_reset_pages_have_the_sites_layout(client, name):
    page = client.get(reverse(name)).content.decode()
    assert 'class="site-header"' in page and "Django administration" not in page
