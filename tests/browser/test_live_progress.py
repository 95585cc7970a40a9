"""A running submission's page in a real browser while its host reports: the compile pass,
then each problem's row as its result arrives, the header's count always that of the rows
filled in; at a laptop's width and a phone's.

The reports go through the portal's own recording task (portal/submissions/tasks.py), as a
host's messages reach it; the page follows by itself (htmx polls its status every 2 s), so
each step waits for the page to show it, never for a fixed time.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from evaluator.contract import Phase, ProblemStatus, progress_message
from evaluator.contract import ProblemResult as Reported
from portal.accounts.models import Membership
from portal.submissions import tasks
from tests.browser.conftest import page_overflow, within_width
from tests.portal.factories import (
    MembershipFactory,
    ProblemFactory,
    SubmissionFactory,
    TeamFactory,
    UserFactory,
)
from tests.portal.judging import finish, passed

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SLUGS = ("all-reduce", "all-gather", "tp-linear")
WRONG = Reported(
    "all-gather",
    ProblemStatus.WRONG_ANSWER,
    4,
    message="rank 1, case demo-1m: worst error 0.5 (abs) / 0.25 (rel)",
    max_abs_err=0.5,
    max_rel_err=0.25,
)
# What each problem's host reports, in the order it judges them.
REPORTS = (passed("all-reduce", 1.8, 1.75, 1.85), WRONG, passed("tp-linear", 0.9, 0.85, 0.95))
LABELS = ("Passed", "Wrong answer", "Passed")

# One read of the whole status panel: htmx may swap it between two separate reads.
SNAPSHOT = """panel => ({
  header: panel.querySelector('.status-line').textContent.replace(/\\s+/g, ' ').trim(),
  rows: [...panel.querySelectorAll('table.results > tbody > tr:not(.log-row)')].map(tr => ({
    slug: tr.cells[0].querySelector('a').getAttribute('href').split('/').at(-2),
    status: tr.cells[1].querySelector('.badge').textContent.trim(),
    provisional: tr.querySelector('.provisional-note') !== null,
  })),
})"""


@pytest.fixture
def running(settings, tmp_path, broker_url):
    """alice's bundle of three problems, taken by a host that has not reported yet."""
    settings.MEDIA_ROOT = tmp_path / "media"
    for slug in SLUGS:
        ProblemFactory(slug=slug)
    team = TeamFactory(name="Alice's Kernels", slug="alices-kernels")
    alice = UserFactory(username="alice")
    MembershipFactory(user=alice, team=team, role=Membership.Role.OWNER)
    return SubmissionFactory(team=team, user=alice, running=True, problems=list(SLUGS))


def _report(submission, done: int, current: str = "", **fields) -> None:
    message = progress_message(
        evaluation_id=str(submission.evaluation_id),
        done=done,
        total=len(SLUGS),
        current=current,
        **fields,
    )
    assert tasks.evaluation_progressed.apply(args=[message]).get()


def _snapshot(page) -> dict[str, Any]:
    return page.locator("#submission-status").evaluate(SNAPSHOT)


def _wait_for_header(page, text: str) -> dict[str, Any]:
    page.locator("#submission-status .status-line", has_text=text).wait_for()
    return _snapshot(page)


def _check_layout(page) -> None:
    """Nothing widens the page; the state, the count and each row's problem and status are
    in the window, not cut off by it (the table scrolls in its own box if it must)."""
    assert page_overflow(page) <= 0
    panel = page.locator("#submission-status")
    for part in (panel.locator(".badge.big"), panel.locator(".status-line > span").last):
        assert part.is_visible() and within_width(page, part)
    for row in panel.locator("table.results > tbody > tr:not(.log-row)").all():
        for cell in row.locator("td").all()[:2]:
            assert within_width(page, cell), cell.inner_text()


def _header_counts(header: str) -> tuple[int, int]:
    match = re.search(r"(\d+) / (\d+) problems judged", header)
    assert match, header
    return int(match[1]), int(match[2])


def _watch(page, submission, shoot) -> None:
    _report(submission, 0, phase=Phase.COMPILING)
    page.goto(f"/submissions/{submission.pk}/")
    snapshot = _wait_for_header(page, "compiling: each of the 3 solutions is imported once")
    assert [r["slug"] for r in snapshot["rows"]] == list(SLUGS)
    assert [r["status"] for r in snapshot["rows"]] == ["compiling"] * 3
    assert "problems judged" not in snapshot["header"]  # no "0 / 3" while it compiles
    _check_layout(page)

    _report(submission, 0, SLUGS[0], phase=Phase.JUDGING)
    snapshot = _wait_for_header(page, "0 / 3 problems judged, now: all-reduce")
    assert [r["status"] for r in snapshot["rows"]] == ["running", "pending", "pending"]

    for done, result in enumerate(REPORTS, start=1):
        current = SLUGS[done] if done < len(SLUGS) else ""
        _report(submission, done, current, phase=Phase.JUDGING, result=result)
        snapshot = _wait_for_header(page, f"{done} / 3 problems judged")
        rows = snapshot["rows"]
        # The header counts exactly the rows that show a result, and every problem has a row.
        assert _header_counts(snapshot["header"]) == (done, len(rows))
        assert [r["provisional"] for r in rows] == [True] * done + [False] * (3 - done)
        assert [r["status"] for r in rows[:done]] == list(LABELS[:done])
        waiting = ["running"] + ["pending"] * (2 - done) if done < 3 else []
        assert [r["status"] for r in rows[done:]] == waiting
        _check_layout(page)
        if done == 2:
            shoot("submission-live")
    assert "recording the results" in snapshot["header"]

    assert finish(submission.evaluation_id, *REPORTS)
    page.locator("#submission-status .badge.big.done").wait_for()
    rows = _snapshot(page)["rows"]
    assert [r["status"] for r in rows] == list(LABELS)
    assert not any(r["provisional"] for r in rows)  # recorded now: they count
    _check_layout(page)


def test_at_1280_the_rows_fill_in_as_the_host_reports(page, sign_in, running, screenshot):
    sign_in(page, running.user)
    _watch(page, running, screenshot)


def test_on_a_phone_the_rows_fill_in_as_the_host_reports(phone, sign_in, running, phone_screenshot):
    sign_in(phone, running.user)
    _watch(phone, running, lambda name: phone_screenshot(f"{name}-390"))
