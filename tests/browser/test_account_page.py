"""The account page in a real browser: from the username in the header, a user adds an
email, is told plainly when the address is taken (with what they typed kept), and sees it
changed; at a laptop's width and a phone's."""

from __future__ import annotations

import pytest
from django.core import mail

from portal.accounts.models import Membership
from tests.browser.conftest import page_overflow
from tests.portal.factories import MembershipFactory, TeamFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery"


@pytest.fixture
def alice(settings):
    # The default hasher is slow on purpose; the form checks the password at each try.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="bob", email="bob@example.org")
    user = UserFactory(username="alice", password=PASSWORD)
    team = TeamFactory(name="Alice's Kernels", slug="alices-kernels")
    MembershipFactory(user=user, team=team, role=Membership.Role.OWNER)
    return user


def _change(page, email: str) -> None:
    page.get_by_label("Email").fill(email)
    page.get_by_label("Current password").fill(PASSWORD)
    page.locator("#email-form button[type=submit]").click()


def test_a_user_adds_then_changes_their_email(page, sign_in, alice, screenshot):
    sign_in(page, alice)
    page.goto("/")
    page.locator("header .nav-user", has_text="alice").click()
    page.get_by_role("heading", name="Your account").wait_for()
    assert page.locator("#account-team").inner_text() == "Alice's Kernels"
    assert page.locator("#account-email").inner_text() == "none"

    _change(page, "BOB@example.org")  # bob's, in other letters
    error = page.locator("#email-form .errorlist")
    error.wait_for()
    assert error.inner_text() == "An account already uses this address."
    assert page.get_by_label("Email").input_value() == "BOB@example.org"

    _change(page, "alice@example.org")
    page.locator(".flash.success", has_text="Your email is now alice@example.org.").wait_for()
    assert page.locator("#account-email").inner_text() == "alice@example.org"
    screenshot("account")

    _change(page, "alice@elsewhere.org")
    page.locator(
        ".flash.success", has_text="A note of the change went to alice@example.org."
    ).wait_for()
    assert page.locator("#account-email").inner_text() == "alice@elsewhere.org"
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]


def test_on_a_phone_the_account_page_fits(phone, sign_in, alice):
    sign_in(phone, alice)
    phone.goto("/account/")
    phone.get_by_label("Current password").wait_for()
    assert page_overflow(phone) <= 0
