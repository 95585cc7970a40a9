"""The queue page in a real browser when busy, as issue 25 found it (8 admin re-runs on the
only worker, and the page said 0 waiting, 0 running): every evaluation counts, re-runs
included, each profile says how many hosts are connected now, and a team sees its own
submissions' places in line; at a laptop's width and a phone's.

Re-runs are queued and started through the portal's services, hosts announce themselves in
the suite's own Redis as workers do (evaluator/host/liveness.py); only the send to the
hosts' queue is replaced, the boundary these tests do not own.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluator.host import liveness
from portal.accounts.models import Membership
from portal.submissions import broker
from portal.submissions.services import evaluation_start, rerun_queue
from tests.browser.conftest import page_overflow, within_width
from tests.portal.factories import (
    MembershipFactory,
    ProblemFactory,
    ProblemResultFactory,
    SubmissionFactory,
    TeamFactory,
    UserFactory,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _eight_reruns(admin) -> None:
    """An admin's 8 re-runs of finished submissions, the first taken by host a."""
    problem = ProblemFactory(slug="all-reduce")
    reruns = []
    for _ in range(8):
        submission = SubmissionFactory(done=True, problems=[problem.slug])
        ProblemResultFactory(submission=submission, problem=problem)
        reruns.append(
            rerun_queue(submission=submission, problem=problem, reason="", requested_by=admin)
        )
    assert evaluation_start(evaluation_id=str(reruns[0].evaluation_id), host="pkb-cpu@a")


@pytest.fixture
def busy(settings, tmp_path, broker_url, monkeypatch):
    """The cpu profile: two hosts connected, one on a re-run and one on alice's submission;
    7 re-runs and two submissions waiting, another team's ahead of alice's. Returns alice
    and her two submissions, waiting and running."""
    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setattr(broker, "send_evaluation", lambda request, *, queue: None)
    for name in ("pkb-cpu@a", "pkb-cpu@b"):
        liveness.announce_worker(broker.client(), profile="cpu", name=name)
    _eight_reruns(UserFactory(username="admin", is_staff=True))
    team = TeamFactory(name="Alice's Kernels", slug="alices-kernels")
    alice = UserFactory(username="alice")
    MembershipFactory(user=alice, team=team, role=Membership.Role.OWNER)
    SubmissionFactory(queued_at=timezone.now() - timedelta(minutes=1))  # another team's
    waiting = SubmissionFactory(team=team, user=alice)
    running = SubmissionFactory(team=team, user=alice, running=True, host="pkb-cpu@b")
    return alice, waiting, running


def _cpu_row(page):
    page.goto("/queue/")
    row = page.locator("table.queue tr[data-profile='cpu']")
    row.wait_for()
    return row


def _check_counts(row, waiting, running) -> None:
    assert row.locator("td.workers").inner_text() == "2 connected"
    assert row.locator("td.queued").inner_text() == "9 (7 re-runs)"
    assert row.locator("td.running").inner_text() == "2 (1 re-run)"
    yours = row.locator("td.yours").inner_text().splitlines()
    assert yours == [
        f"#{waiting.pk}: 9th in line of 9 waiting",
        f"#{running.pk}: running on pkb-cpu@b",
    ]


def test_at_1280_the_busy_queue_counts_everything_and_shows_my_place(
    page, sign_in, busy, screenshot
):
    alice, waiting, running = busy
    sign_in(page, alice)
    row = _cpu_row(page)
    _check_counts(row, waiting, running)
    assert page_overflow(page) <= 0
    # The whole row is in the window, no column behind a scroll.
    assert all(within_width(page, cell) for cell in row.locator("td").all())
    idle = page.locator("table.queue tr[data-profile='h200x4'] td.workers")
    assert idle.inner_text() == "none connected"
    hosts = page.locator("table.hosts tr[data-profile='cpu']")
    assert [h.get_attribute("data-worker") for h in hosts.all()] == ["pkb-cpu@a", "pkb-cpu@b"]
    screenshot("queue")
    # The place is the submission page's too.
    row.locator("td.yours").get_by_role("link", name=f"#{waiting.pk}").click()
    assert page.locator("#submission-status .queue-place").inner_text() == "9th in line"


def test_on_a_phone_the_busy_queue_fits_and_my_place_is_reachable(phone, sign_in, busy):
    alice, waiting, running = busy
    sign_in(phone, alice)
    row = _cpu_row(phone)
    _check_counts(row, waiting, running)
    assert page_overflow(phone) <= 0
    # The table scrolls in its own box: its first columns are in the window as it opens,
    # the team's own column once scrolled to, never cut off by the window's edge.
    for cell in row.locator("td").all()[:2]:
        assert cell.is_visible() and within_width(phone, cell), cell.inner_text()
    yours = row.locator("td.yours")
    yours.scroll_into_view_if_needed()
    assert yours.is_visible() and within_width(phone, yours)
    assert page_overflow(phone) <= 0
