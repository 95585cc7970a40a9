"""Problem pages a kernel engineer can aim from, at a laptop's width and a phone's."""

from __future__ import annotations

import pytest

from portal.problems.services import problems_sync
from problems import get_problem
from tests.browser.conftest import PHONE, page_overflow
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def catalog(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    problems_sync()


def test_the_list_shows_slugs_and_who_solved_what(page, catalog, screenshot):
    from portal.problems.models import Problem

    submission = SubmissionFactory(team=TeamFactory(name="Ring Masters"), done=True)
    ProblemResultFactory(
        submission=submission, problem=Problem.objects.get(slug="all-reduce"), speedup=1.7
    )
    page.goto("/problems/")
    card = page.locator(".problem-card[data-slug='all-reduce']")
    assert card.locator("code.slug").inner_text() == "all-reduce.py"
    assert "1 team solved" in card.inner_text() and "best 1.70×" in card.inner_text()
    other = page.locator(".problem-card[data-slug='ep-dispatch']")
    assert "No team has solved it yet" in other.inner_text()
    assert page_overflow(page) <= 0
    screenshot("problems")


def test_a_problem_page_shows_tolerances_times_bounds_helpers_and_a_starter(
    page, catalog, screenshot
):
    spec = get_problem("ep-dispatch")
    page.goto("/problems/ep-dispatch/")
    tolerances = page.locator("#tolerances tbody tr")
    assert tolerances.count() == len(spec.dtypes)
    assert "exactly" in tolerances.first.inner_text()  # a dispatch copies rows bit for bit
    assert page.locator("#demo-cases tbody tr").count() == len(spec.eval_cases)
    assert "production hosts judge eval cases" in page.locator("#demo-note").inner_text().lower()
    helper = page.locator("#helper-modules details").first
    assert "problems/expert/_routing_a.py" in helper.locator("summary").inner_text()
    assert "def sort_by_expert" in helper.locator("pre").inner_text()
    assert helper.locator("pre").is_visible()
    with page.expect_download() as download:
        page.locator("#starter").click()
    assert download.value.suggested_filename == "ep-dispatch.py"
    text = open(download.value.path()).read()
    assert "def solution" in text and "from problems" not in text
    screenshot("problem-ep-dispatch")


def test_a_problem_page_shows_the_bench_tables_reference_times_and_bounds(page, catalog):
    page.goto("/problems/all-reduce/")
    table = page.locator("#reference-times table[data-profile='h200x4']")
    row = table.locator("tr[data-case='demo-1m']")
    assert row.locator(".ref-time").inner_text().endswith("µs")
    assert "bench 2026-11-22" in row.inner_text()
    assert row.locator(".bound").inner_text().endswith("µs")
    assert "GB/s" in page.locator("#reference-times h3[data-profile='h200x4']").inner_text()


def test_on_a_phone_no_problem_page_overflows(phone, catalog, phone_screenshot):
    from portal.problems.models import Problem

    wider = {}
    for slug in Problem.objects.order_by("slug").values_list("slug", flat=True):
        phone.goto(f"/problems/{slug}/")
        if (extra := page_overflow(phone)) > 0:
            wider[slug] = extra
    assert not wider, f"wider than {PHONE['width']} px: {wider}"
    phone.goto("/problems/all-reduce/")
    phone_screenshot("problem-390")
    phone.goto("/problems/")
    phone.locator(".problem-card").first.wait_for()
    assert page_overflow(phone) <= 0


def test_at_1280_a_problem_page_of_each_category_fits(page, catalog):
    from portal.problems.models import Category, Problem

    for category in Category:
        problem = Problem.objects.filter(category=category).order_by("slug").first()
        page.goto(f"/problems/{problem.slug}/")
        assert page_overflow(page) <= 0, problem.slug
