"""Admin pages at a laptop's width (1280 px) and a phone's (390 px): nothing cut off."""

from __future__ import annotations

import pytest

from portal.problems.services import problems_sync
from tests.browser.conftest import page_overflow, within_width
from tests.portal.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROBLEMS = "/admin/problems/problem/"


@pytest.fixture
def admin(db):
    return UserFactory(username="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def catalog(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    problems_sync()


def test_at_1280_the_problem_list_shows_every_column(page, admin, catalog, sign_in):
    sign_in(page, admin)
    page.goto(PROBLEMS)
    header = page.locator("#result_list thead th")
    assert header.count() >= 9
    assert page_overflow(page) <= 0
    # The table's last column is on the screen, not behind the window's right edge.
    assert within_width(page, header.last), header.last.inner_text()
    assert within_width(page, page.locator("#result_list"))


def test_on_a_phone_the_problem_list_scrolls_in_its_box(phone, admin, catalog, sign_in):
    sign_in(phone, admin)
    phone.goto(PROBLEMS)
    phone.locator("#result_list").wait_for()
    assert page_overflow(phone) <= 0
