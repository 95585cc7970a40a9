"""A real Chromium (Debian's package) driven by Playwright against a live test server.

`make test` installs Chromium first (scripts/ensure-chromium); where it cannot, these tests
skip and say why. The workers fixture (tests/integration) judges uploads for real.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.integration.conftest import broker_url, workers  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]
# The two widths every page is checked at: a laptop's (the `page` fixture) and a phone's.
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

# Playwright's sync API runs an event loop in this thread; Django refuses database calls
# from a thread with a running loop unless told that it is safe, which it is here: the
# loop belongs to Playwright, and the test code stays synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _chromium() -> str | None:
    found = subprocess.run(
        [str(REPO / "scripts" / "ensure-chromium")], capture_output=True, text=True, check=False
    )
    path = found.stdout.strip().splitlines()[-1] if found.stdout.strip() else ""
    return path if path and os.access(path, os.X_OK) else None


@pytest.fixture(scope="session")
def browser() -> Iterator:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (scripts/ensure-chromium says how)")
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox cannot start.
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _page(browser, live_server, **options) -> Iterator:
    context = browser.new_context(base_url=live_server.url, **options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    visited: list[str] = []
    page.on("framenavigated", lambda frame: _note(page, frame, visited, live_server.url))
    yield page
    # Every page a browser test went through must fit the window it was opened in (issue
    # 40: problem pages overflowed a phone while no test looked at them at that width).
    overflows = _overflows(page, visited)
    context.close()
    assert not overflows, f"wider than {page.viewport_size['width']} px: {overflows}"


def _note(page, frame, visited: list[str], origin: str) -> None:
    url = frame.url.split("#")[0]
    if frame is page.main_frame and url.startswith(origin) and url not in visited:
        visited.append(url)


def _overflows(page, visited: list[str]) -> dict[str, int]:
    """Goes through the pages the test visited again (the last state of each, read with GET)
    and says by how much each is wider than the window."""
    found = {}
    measured = _MEASURED.pop(id(page), set())  # the test read these itself
    for url in [url for url in visited if url not in measured]:
        page.goto(url)
        if (extra := page_overflow(page)) > 0:
            found[url] = extra
    return found


@pytest.fixture
def page(browser, live_server) -> Iterator:
    yield from _page(browser, live_server, viewport=LAPTOP)


@pytest.fixture
def phone(browser, live_server) -> Iterator:
    yield from _page(browser, live_server, viewport=PHONE, is_mobile=True)


# The pages (by id) and URLs whose overflow a test has read itself, which the fixtures' own
# check then need not load again.
_MEASURED: dict[int, set[str]] = {}


def page_overflow(page) -> int:
    """How far the page itself is wider than the window (a table may scroll in its box).

    Measured against the width the window was opened at, not `window.innerWidth`: a phone's
    browser widens its layout viewport to fit a page that overflows, so innerWidth grows with
    the page and the difference reads 0 on a page twice the phone's width."""
    width = page.evaluate("document.documentElement.scrollWidth")
    _MEASURED.setdefault(id(page), set()).add(page.url.split("#")[0])
    return width - page.viewport_size["width"]


def within_width(page, locator) -> bool:
    """Whether the element lies wholly inside the window's width (not cut off by it)."""
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


@pytest.fixture
def sign_in(live_server):
    """Starts a browser signed in as a user, with a session made on the server's side: the
    journeys test the login form; other pages need not go through it each time."""

    def sign(page, user) -> None:
        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        cookie = {"name": name, "value": client.cookies[name].value, "url": live_server.url}
        page.context.add_cookies([cookie])

    return sign


def _screenshot(page, name: str, *, full_page: bool) -> None:
    folder = os.environ.get("PKB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


@pytest.fixture
def screenshot(page):
    """Saves a full-page screenshot under $PKB_SCREENSHOTS (docs/screenshots) when set."""
    return lambda name: _screenshot(page, name, full_page=True)


@pytest.fixture
def phone_screenshot(phone):
    """As `screenshot`, of the phone's first screen (what a visitor sees before scrolling)."""
    return lambda name: _screenshot(phone, name, full_page=False)
