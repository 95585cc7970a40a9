"""Modes, hardware, quotas and artifacts as a kernel engineer clicks through them, in a
real Chromium (issue 26). Results come through the portal's recording path, as a host's
finished message reaches it."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from evaluator.contract import (
    ARTIFACT_CAP_BYTES,
    Artifact,
    EvaluationOutcome,
    finished_message,
)
from evaluator.host import liveness
from portal.accounts.models import Membership
from portal.submissions import broker
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_finish
from tests.portal.bundles import solving
from tests.portal.factories import (
    MembershipFactory,
    ProblemFactory,
    SubmissionFactory,
    TeamFactory,
    UserFactory,
)
from tests.portal.judging import passed

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery"
TRACE = json.dumps({"traceEvents": [{"name": "ncclKernel_AllReduce", "ph": "X", "ts": 1}]})


@pytest.fixture
def world(settings, tmp_path, monkeypatch):
    """Alice's team and Charlie's, one problem, a cpu worker connected and none for the
    GPUs; requests for hosts are kept here (the broker's queues are not under test)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    sent: list = []
    monkeypatch.setattr(broker, "send_evaluation", lambda request, *, queue: sent.append(queue))
    keys = broker.client()
    for key in keys.scan_iter("pkb:*"):
        keys.delete(key)
    liveness.announce_worker(keys, profile="cpu", name="pkb-cpu@host-a")
    ProblemFactory(slug="all-reduce", title="All-reduce (sum)")
    team = TeamFactory(name="Alice's Kernels", slug="alices-kernels")
    alice = UserFactory(username="alice")
    MembershipFactory(user=alice, team=team, role=Membership.Role.OWNER)
    charlie = UserFactory(username="charlie")
    MembershipFactory(user=charlie, team=TeamFactory(name="Charlie Ltd"))
    yield {"team": team, "alice": alice, "sent": sent}
    for key in keys.scan_iter("pkb:*"):
        keys.delete(key)


def log_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_text(username, exact=True).first.wait_for()


def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "all-reduce.zip"
    path.write_bytes(solving("all-reduce"))
    return path


def test_a_benchmark_run_on_hardware_without_a_worker(page, world, tmp_path, screenshot):
    log_in(page, "alice")
    page.get_by_role("link", name="Submit", exact=True).click()
    modes = page.locator("fieldset.modes")
    for mode in ("test", "benchmark", "ranked", "profile"):
        assert modes.locator(f"label[data-mode='{mode}'] .badge.mode-{mode}").count() == 1
    assert page.locator("input[name=mode][value=ranked]").is_checked()
    ranked = modes.locator("label[data-mode='ranked'] .quota-line").inner_text()
    assert re.fullmatch(r"0 of \d+ ranked runs used in the last 24 hours", ranked)
    hardware = page.locator("#id_profile")
    assert "1 worker connected" in hardware.locator("option[value=cpu]").inner_text()
    assert "no worker connected" in hardware.locator("option[value=h200x4]").inner_text()
    screenshot("submit-modes")

    page.locator("input[type=file]").set_input_files(str(bundle(tmp_path)))
    page.locator("input[name=mode][value=benchmark]").check()
    hardware.select_option("h200x4")
    page.get_by_role("button", name=re.compile("Submit for")).click()

    page.locator("#submission-status").wait_for()
    assert "No h200x4 worker (4x H200 (NVLink)) is connected now" in page.content()
    assert page.locator("h1 + p .badge.mode-benchmark").inner_text() == "benchmark"
    assert "shown to your team only; never ranked" in page.locator("#mode-note").inner_text()
    assert "waiting for a h200x4 worker" in page.locator("#submission-status").inner_text()
    submission = Submission.objects.get()
    assert (submission.mode, submission.profile) == ("benchmark", "h200x4")
    assert world["sent"] == ["gpu.h200x4.unranked"]  # never ranked: its own queue

    # The team's public page lists it, labelled, to the team; not to anyone else.
    page.goto("/teams/alices-kernels/")
    row = page.locator(f"#team-history tr[data-submission='{submission.pk}']")
    assert row.locator(".badge.mode-benchmark").count() == 1
    page.context.clear_cookies()
    page.goto("/teams/alices-kernels/")
    assert page.locator(f"#team-history tr[data-submission='{submission.pk}']").count() == 0


def test_a_full_mode_is_refused_with_when_the_next_slot_frees(page, world, tmp_path, settings):
    settings.PKB_PROFILE_RUNS_PER_HOUR = 1
    earlier = SubmissionFactory(team=world["team"], user=world["alice"], done=True, mode="profile")
    Submission.objects.filter(pk=earlier.pk).update(
        created_at=timezone.now() - timedelta(minutes=15)
    )
    log_in(page, "alice")
    page.goto("/submit/")
    line = page.locator("label[data-mode='profile'] .quota-line")
    assert "1 of 1 profile runs used in the last hour" in line.inner_text()
    assert "next at" in line.inner_text() and "form-error" in line.get_attribute("class")

    page.locator("input[type=file]").set_input_files(str(bundle(tmp_path)))
    page.locator("input[name=mode][value=profile]").check()
    page.get_by_role("button", name=re.compile("Submit for")).click()
    alert = page.get_by_role("alert").first
    alert.wait_for()
    # The slot frees 45 minutes on: after 23:15 UTC that is tomorrow, and the clock says
    # the day too ("Nov 27 00:20 UTC"), as quotas.clock does for any other day.
    assert re.match(
        r"Your team has used 1 of 1 profile runs in the last hour; "
        r"next at (\w{3} \d{1,2} )?\d\d:\d\d UTC \(in \d+ min\)",
        alert.inner_text(),
    )
    assert Submission.objects.count() == 1
    # Another mode still goes.
    page.locator("input[type=file]").set_input_files(str(bundle(tmp_path)))
    page.locator("input[name=mode][value=test]").check()
    page.get_by_role("button", name=re.compile("Submit for")).click()
    page.locator("#submission-status").wait_for()
    assert Submission.objects.latest("pk").mode == "test"


@pytest.fixture
def profiled(world) -> Submission:
    submission = SubmissionFactory(
        team=world["team"], user=world["alice"], running=True, mode="profile"
    )
    artifacts = [
        Artifact.build(
            name="rank0.trace.json",
            media_type="application/json",
            data=TRACE.encode(),
            note="rank 0, case dev-fp32, 10 calls",
        ),
        Artifact.build(
            name="rank1.trace.json",
            media_type="application/json",
            data=b"{" * (ARTIFACT_CAP_BYTES + 1),
            note="rank 1, case dev-fp32, 10 calls",
        ),
    ]
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[passed("all-reduce", 1.2)],
        artifacts=artifacts,
    )
    assert evaluation_finish(message=message)
    return submission


def test_the_team_downloads_a_trace_and_another_team_gets_a_404(
    page, browser, live_server, profiled, screenshot
):
    log_in(page, "alice")
    page.goto(f"/submissions/{profiled.pk}/")
    table = page.locator("#artifacts table")
    first = table.locator("tr[data-artifact='rank0.trace.json']")
    assert "rank 0, case dev-fp32, 10 calls" in first.inner_text()
    assert "71 bytes" in first.inner_text()
    assert first.locator(".truncated").count() == 0
    cut = table.locator("tr[data-artifact='rank1.trace.json'] .truncated")
    assert cut.inner_text() == "cut at 8 MiB"
    assert "8.0 MiB" in table.locator("tr[data-artifact='rank1.trace.json']").inner_text()
    help_text = page.locator("#trace-help").inner_text()
    assert "ui.perfetto.dev" in help_text and "Open trace file" in help_text
    assert "chrome://tracing" in help_text
    screenshot("submission-artifacts")

    with page.expect_download() as download:
        first.get_by_role("link", name="rank0.trace.json").click()
    assert download.value.suggested_filename == "rank0.trace.json"
    assert json.loads(Path(download.value.path()).read_text())["traceEvents"][0]["ph"] == "X"

    url = f"/submissions/{profiled.pk}/artifacts/rank0.trace.json/"
    outsider = browser.new_context(base_url=live_server.url)
    other = outsider.new_page()
    try:
        log_in(other, "charlie")
        assert other.goto(url).status == 404
        assert other.goto(f"/submissions/{profiled.pk}/").status == 404
    finally:
        outsider.close()
