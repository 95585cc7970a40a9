"""An example bundle's row, as a visitor sees it on the board and on a problem's page."""

from __future__ import annotations

import pytest

from portal.problems.models import Problem
from portal.problems.services import problems_sync
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAST = "Example: examples/fast"


def _judged(team, problem: Problem, *, label: str = "", **numbers) -> None:
    submission = SubmissionFactory(team=team, done=True, example_label=label)
    ProblemResultFactory(submission=submission, problem=problem, **numbers)


@pytest.fixture
def board(settings, tmp_path):
    """Ring Masters at 1.5x on all-reduce, the fast example at 1.84x (1.80-1.88)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    problems_sync()
    all_reduce = Problem.objects.get(slug="all-reduce")
    _judged(TeamFactory(name="Ring Masters", slug="ring-masters"), all_reduce, speedup=1.5)
    _judged(
        TeamFactory(name="Examples", slug="examples"),
        all_reduce,
        label=FAST,
        speedup=1.84,
        speedup_low=1.80,
        speedup_high=1.88,
        time_us=42.0,
    )


def test_the_board_shows_the_labelled_example_row_without_a_rank(page, board, screenshot):
    page.goto("/")
    rows = page.locator("#leaderboard tbody tr")
    rows.first.wait_for()
    example = page.locator("#leaderboard tr.example")
    assert example.count() == 1
    assert FAST in example.inner_text() and example.locator(".badge.example").is_visible()
    assert example.locator("td").first.inner_text() == "–"
    texts = rows.all_inner_texts()
    order = [next(i for i, t in enumerate(texts) if name in t) for name in (FAST, "Ring Masters")]
    assert order == sorted(order), "the example is faster: above the team, yet unranked"
    team = page.locator("#leaderboard tr.team-row", has_text="Ring Masters")
    assert team.locator("td").first.inner_text() == "1"
    screenshot("leaderboard-example")


def test_a_problem_page_shows_the_examples_result_and_its_public_source(page, board, screenshot):
    page.goto("/problems/all-reduce/")
    example = page.locator("#problem-ranking tr.example")
    example.wait_for()
    text = example.inner_text()
    assert FAST in text and "1.84× (1.80–1.88)" in text and "42.0 µs" in text
    texts = page.locator("#problem-ranking tbody tr").all_inner_texts()
    assert FAST in texts[0] and "Ring Masters" in texts[1] and "baseline" in texts[2]
    screenshot("problem-example")
    # Signed out, the source downloads: examples are public code.
    with page.expect_download() as download:
        example.get_by_role("link", name="source").click()
    # The whole bundle as uploaded, not the archive of public problems' files only.
    assert download.value.suggested_filename.endswith("-bundle.zip")
