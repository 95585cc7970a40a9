"""What a visitor does, in a real browser: sign up, make a team, upload, watch, compare."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from portal.problems.services import problems_sync
from portal.submissions.broker import worker_missing
from problems import all_problems
from problems.spec import Category
from tests.evaluator.archives import make_zip

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
JUDGED_WITHIN_MS = 300_000
CONNECTED_WITHIN_S = 120.0


def _sign_up(page, username: str) -> None:
    page.goto("/")
    page.get_by_role("link", name="Sign up").click()
    page.locator("#id_username").fill(username)
    page.locator("#id_password1").fill("correct-horse-battery-9")
    page.locator("#id_password2").fill("correct-horse-battery-9")
    page.get_by_role("button", name="Create account").click()
    page.get_by_text(username, exact=True).first.wait_for()


def _worker_connected(profile: str) -> None:
    """Until the evaluator worker has announced itself (it imports torch and checks its
    sandbox first), as after `make run`: a team that submits sooner is told, rightly, that
    no worker is connected, and the pages the screenshots keep said so."""
    deadline = time.monotonic() + CONNECTED_WITHIN_S
    while worker_missing(profile):
        assert time.monotonic() < deadline, f"no {profile} worker announced itself"
        time.sleep(0.2)


def _bundle(tmp_path: Path) -> Path:
    path = tmp_path / "pytorch.zip"
    path.write_bytes(make_zip({p.name: p.read_text() for p in sorted(EXAMPLE.glob("*.py"))}))
    return path


def test_a_new_team_uploads_watches_and_finds_itself_ranked(page, workers, tmp_path, screenshot):
    problems_sync()
    _sign_up(page, "alice")

    page.get_by_role("link", name="Team", exact=True).click()
    page.get_by_label("Team name").fill("Alice's Kernels")
    page.get_by_role("button", name="Create team").click()
    page.get_by_role("heading", name=re.compile("Alice's Kernels")).first.wait_for()
    screenshot("team")

    _worker_connected("cpu")
    page.get_by_role("link", name="Submit", exact=True).click()
    screenshot("submit")
    page.locator("input[type=file]").set_input_files(str(_bundle(tmp_path)))
    page.get_by_role("button", name=re.compile("Submit for")).click()

    # The submission page follows the evaluation live (htmx) until it is done.
    status = page.locator("#submission-status")
    status.wait_for()
    page.locator("#submission-status .badge.big.done").wait_for(timeout=JUDGED_WITHIN_MS)
    screenshot("submission")
    failures = ".badge.wrong_answer, .badge.runtime_error, .badge.timeout, .badge.compile_error"
    assert status.locator(failures).count() == 0
    for example in EXAMPLE.glob("*.py"):
        assert status.locator(f'a[href*="/{example.stem}/"]').count() >= 1, example.stem

    page.get_by_role("link", name="Leaderboard").first.click()
    row = page.locator("table tr", has_text="Alice's Kernels")
    row.wait_for()
    screenshot("leaderboard")

    page.locator("#category-switcher").get_by_role("link", name="Collective primitives").click()
    page.wait_for_url(re.compile(r"category=collective"))
    assert page.locator("table tr", has_text="Alice's Kernels").count() == 1
    screenshot("leaderboard-collective")

    # The team's public page, then a problem's page ranks the team on that problem.
    page.locator("table tr", has_text="Alice's Kernels").get_by_role("link").first.click()
    page.locator("#team-best tr[data-problem='all-reduce']").wait_for()
    screenshot("team-public")
    page.goto("/problems/all-reduce/")
    assert page.locator("#problem-ranking tr", has_text="Alice's Kernels").count() == 1
    screenshot("problem")


def test_the_leaderboard_switches_through_every_category(page, screenshot):
    problems_sync()
    page.goto("/")
    switcher = page.locator("#category-switcher")
    for category in Category:
        switcher.get_by_role("link", name=category.label, exact=True).click()
        page.wait_for_url(re.compile(rf"category={category.value}$"))
        heading = page.locator("#leaderboard thead th.group").first
        assert heading.text_content().strip() == category.label, category
        # The baseline row (the reference) is on every category's board.
        assert page.locator("#leaderboard tbody tr").count() >= 1, category
    screenshot("leaderboard-other")


# One problem page per category added with problem sets II and III: their descriptions
# carry shapes in `code` spans, and the public cases show the sizes they run at.
NEW_CATEGORIES = ("expert", "data", "fsdp", "pipeline", "graph", "geometric", "other")


@pytest.mark.parametrize("category", NEW_CATEGORIES)
def test_a_problem_page_shows_description_signature_and_shapes(page, category, screenshot):
    problems_sync()
    problem = next(p for p in all_problems() if p.category == category)
    page.goto(f"/problems/{problem.slug}/")
    page.get_by_role("heading", name=problem.title).wait_for()
    description = page.locator("p.description")
    assert description.locator("code").count() >= 3, "shapes and names are set as code"
    first_words = " ".join(problem.description.split()[:6]).replace("`", "")
    assert first_words in " ".join(description.inner_text().split())
    signature = page.locator("pre.code code").first.inner_text()
    assert signature == problem.signature
    cases = page.locator("#public-cases tbody tr")
    assert cases.count() == len(problem.dev_cases)
    first = problem.dev_cases[0]
    for key, value in first.params.items():
        assert cases.first.get_by_text(f"{key}={value}", exact=True).count() == 1
    screenshot(f"problem-{category}")


def test_a_bad_bundle_is_refused_with_its_reason_and_nothing_is_kept(page, tmp_path):
    problems_sync()
    _sign_up(page, "charlie")
    page.get_by_role("link", name="Team", exact=True).click()
    page.get_by_label("Team name").fill("Charlie Ltd")
    page.get_by_role("button", name="Create team").click()

    bad = tmp_path / "bad.zip"
    bad.write_bytes(make_zip({"no-such-problem.py": "def solution(x):\n    return x\n"}))
    page.get_by_role("link", name="Submit", exact=True).click()
    page.locator("input[type=file]").set_input_files(str(bad))
    page.get_by_role("button", name=re.compile("Submit for")).click()
    alert = page.get_by_role("alert").first
    alert.wait_for()
    assert "no-such-problem" in alert.inner_text()
    assert "/submit" in page.url


def test_the_api_documentation_renders_the_schema(page, screenshot):
    page.goto("/api/docs/")
    page.locator(".swagger-ui .opblock-tag", has_text="submissions").first.wait_for()
    screenshot("api-docs")
