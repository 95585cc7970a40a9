"""The leaderboard's layout at a laptop's width (1280 px) and a phone's (390 px)."""

from __future__ import annotations

import pytest

from portal.problems.models import Category, Problem
from portal.problems.services import problems_sync
from tests.browser.conftest import PHONE, page_overflow
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def full_board(settings, tmp_path):
    """Three teams with a result in every category, so every category column is drawn;
    the longest name is one a team could well choose."""
    settings.MEDIA_ROOT = tmp_path / "media"
    problems_sync()
    firsts = [Problem.objects.filter(category=c).order_by("slug").first() for c in Category]
    names = ["Ring Masters", "Tensor Twins", "The Extremely Long Team Name Of Kernels"]
    for n, name in enumerate(names):
        team = TeamFactory(name=name, slug=f"team-{n}")
        submission = SubmissionFactory(team=team, done=True)
        for problem in firsts:
            ProblemResultFactory(submission=submission, problem=problem, speedup=1.2 + n / 10)


def test_at_1280_the_page_does_not_overflow_and_every_category_is_reachable(
    page, full_board, screenshot
):
    page.goto("/")
    page.locator("#leaderboard tbody tr.team-row").first.wait_for()
    assert page_overflow(page) <= 0
    groups = page.locator("#leaderboard thead th.cat")
    assert groups.count() == len(Category)
    # The whole table fits its box: no category column is cut off or behind a scroll.
    hidden = page.locator(".table-scroll").evaluate("box => box.scrollWidth - box.clientWidth")
    assert hidden <= 0
    last = groups.last.bounding_box()
    assert last is not None and last["x"] + last["width"] <= 1280
    screenshot("leaderboard-1280")


def test_on_a_phone_the_first_screen_shows_the_table_not_the_rules(
    phone, full_board, phone_screenshot
):
    phone.goto("/")
    phone.locator("#leaderboard tbody tr.team-row").first.wait_for()
    assert page_overflow(phone) <= 0
    # The table scrolls in its own box; its first columns are on the first screen.
    first_columns = ("th.rank", "th.team", "th.fast-1", "tr.team-row td.team", "td.fast-1")
    for selector in (f"#leaderboard {s}" for s in first_columns):
        box = phone.locator(selector).first.bounding_box()
        assert box is not None, selector
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], selector
        assert box["y"] + box["height"] <= PHONE["height"], f"{selector} below the first screen"
    phone_screenshot("leaderboard-390")
    link = phone.get_by_role("link", name="About scoring")
    assert link.is_visible()
    link.click()
    phone.get_by_role("heading", name="About scoring").wait_for()
    assert "interval" in phone.locator("#scoring-rule").inner_text()


def test_hardware_is_a_tab_row_and_the_cpu_board_says_why_roofline_is_empty(page, full_board):
    page.goto("/")
    tabs = page.locator("#profile-switcher")
    assert tabs.locator("[aria-current=page]").inner_text().startswith("CPU")
    assert "CPU hosts measure no link bandwidth" in page.locator("#roofline-note").inner_text()
    tabs.get_by_role("link", name="4x H200 (NVLink)").click()
    page.wait_for_url("**/?profile=h200x4")
    assert page.locator("#profile-switcher [aria-current=page]").inner_text().startswith("4x H200")
    assert page.locator("#roofline-note").count() == 0


def _luminance(rgb: str) -> float:
    """WCAG's relative luminance of a computed `rgb(r, g, b)` colour."""
    channels = [int(c) / 255 for c in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(foreground: str, background: str) -> float:
    light, dark = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_every_hardware_tabs_no_worker_note_is_readable(phone, full_board):
    """No worker is connected in this test, so each tab says so; on the selected tab the
    note was grey on the accent blue (about 1:1, unreadable in the screenshots)."""
    phone.goto("/")
    notes = phone.locator("#profile-switcher .chip .no-worker")
    assert notes.count() >= 2
    for i in range(notes.count()):
        colours = notes.nth(i).evaluate(
            "note => [getComputedStyle(note).color,"
            " getComputedStyle(note.closest('.chip')).backgroundColor]"
        )
        assert _contrast(*colours) >= 4.5, colours  # WCAG AA for text
