"""The 404 page in a real browser: the site's header, styles and favicon, not a bare page."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_unknown_page_shows_the_sites_chrome(page):
    response = page.goto("/no-such-page/")
    assert response is not None and response.status == 404
    assert page.locator("h1").inner_text() == "Page not found"
    header = page.locator("header.site-header")
    assert header.is_visible() and "Problems" in header.inner_text()
    # The stylesheet applied: the header has the site's dark band, not the default white.
    background = header.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(icon).status == 200
    page.locator("#not-found a", has_text="The leaderboard").click()
    page.wait_for_url("**/")
    assert page.locator("header.site-header").is_visible()
