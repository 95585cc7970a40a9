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

from tests.integration.conftest import broker_url, workers  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]

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


@pytest.fixture
def page(browser, live_server) -> Iterator:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot(page):
    """Saves a full-page screenshot under $PKB_SCREENSHOTS (docs/screenshots) when set."""
    folder = os.environ.get("PKB_SCREENSHOTS")

    def take(name: str) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)

    return take
