"""The header marks the page you are on, and only that one (issue 40)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def current(html: str) -> list[str]:
    """The text of each header link marked as the current page."""
    nav = html[html.index('<nav class="site-nav"') : html.index("</nav>")]
    return re.findall(r'<a [^>]*aria-current="page"[^>]*>([^<]*)</a>', nav)


def test_the_sign_up_page_marks_sign_up_not_team(client):
    assert current(client.get(reverse("accounts:signup")).content.decode()) == ["Sign up"]


def test_team_pages_mark_team_and_the_account_page_the_username(client, alice):
    client.force_login(alice)
    assert current(client.get(reverse("accounts:team")).content.decode()) == ["Team"]
    assert current(client.get(reverse("accounts:account")).content.decode()) == ["alice"]
