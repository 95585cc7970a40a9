"""The queue as the site tells it: every evaluation a host will run counts (submissions and
re-runs for the ranking alike) on the queue page, its JSON, the admin's queue and /metrics;
each profile says how many hosts are connected now; a team sees where its own evaluations
stand. On the real database and the suite's real Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from evaluator.host import liveness
from portal.submissions import broker
from portal.submissions.services import rerun_queue
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def keys() -> Iterator[redis.Redis]:
    client = broker.client()

    def forget() -> None:
        found = list(client.scan_iter("pkb:*"))
        if found:
            client.delete(*found)

    forget()
    yield client
    forget()


@pytest.fixture
def eight_reruns(problems, admin, sent):
    """An admin's 8 re-runs of finished submissions on the cpu profile: the first taken
    by the only host, 7 waiting behind it (as the issue saw: the queue said 0 and 0)."""
    reruns = []
    for _ in range(8):
        submission = SubmissionFactory(done=True, problems=["all-reduce"])
        ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=1.5)
        rerun = rerun_queue(
            submission=submission, problem=problems["all-reduce"], reason="", requested_by=admin
        )
        assert rerun is not None
        reruns.append(rerun)
    reruns[0].status, reruns[0].host = "running", "pkb-cpu@host"
    reruns[0].save()
    return reruns


def cpu_row(client) -> dict:
    rows = client.get(reverse("ops:queue-json")).json()["profiles"]
    return next(r for r in rows if r["profile"] == "cpu")


def test_reruns_count_on_the_queue_page_and_its_json(client, eight_reruns):
    SubmissionFactory()  # and a team's submission waiting behind them
    row = cpu_row(client)
    assert (row["queued"], row["running"]) == (8, 1)
    assert (row["reruns_queued"], row["reruns_running"]) == (7, 1)
    assert row["oldest_wait_s"] is not None
    page = client.get(reverse("ops:queue")).content.decode()
    assert '<td class="queued">8 <span class="muted small">(7 re-runs)</span></td>' in page
    assert '<td class="running">1 <span class="muted small">(1 re-run)</span></td>' in page


def test_reruns_count_in_the_metrics(client, eight_reruns):
    text = client.get(reverse("ops:metrics")).content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("pkb_queue_depth", (("profile", "cpu"),))] == 7
    assert samples[("pkb_queue_running", (("profile", "cpu"),))] == 1
    assert samples[("pkb_queue_reruns", (("profile", "cpu"), ("state", "queued")))] == 7


def test_the_admin_queue_counts_reruns_beside_submissions(client, admin, eight_reruns):
    SubmissionFactory(running=True)
    client.force_login(admin)
    page = client.get(reverse("admin:submissions_activesubmission_changelist")).content.decode()
    summary = page[page.index('id="queue-summary"') :]
    cpu = summary[summary.index('data-profile="cpu"') :]
    assert '<td class="queued">7</td>' in cpu
    assert '<td class="running">2</td>' in cpu  # the submission and the re-run
    assert "<td>7 / 1</td>" in cpu


def test_each_profile_says_how_many_hosts_are_connected_now(client, keys, settings):
    now = time.time()
    liveness.announce_worker(keys, profile="cpu", name="pkb-cpu@a", now=now)
    liveness.announce_worker(keys, profile="cpu", name="pkb-cpu@b", now=now - 1)
    # Silent for more than three heartbeats: gone.
    liveness.announce_worker(
        keys, profile="h200x4", name="pkb-h200x4@c", now=now - 4 * settings.PKB_HEARTBEAT_S
    )
    rows = {r["profile"]: r for r in client.get(reverse("ops:queue-json")).json()["profiles"]}
    assert rows["cpu"]["workers"] == 2 and rows["h200x4"]["workers"] == 0
    page = client.get(reverse("ops:queue")).content.decode()
    cpu = page[page.index('<tr data-profile="cpu">') :]
    assert '<span class="connected">2 connected</span>' in cpu[: cpu.index("</tr>")]
    h200 = page[page.index('<tr data-profile="h200x4">') :]
    assert '<span class="no-worker">none connected</span>' in h200[: h200.index("</tr>")]


def test_an_unreachable_broker_says_it_cannot_tell(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert cpu_row(client)["workers"] is None
    assert "cannot tell" in client.get(reverse("ops:queue")).content.decode()


def test_a_team_sees_where_its_own_evaluations_stand(client, alice, team, charlie, eight_reruns):
    now = timezone.now()
    SubmissionFactory(queued_at=now - timedelta(minutes=1))  # another team's, ahead
    mine = SubmissionFactory(team=team, user=alice, queued_at=now)
    running = SubmissionFactory(team=team, user=alice, running=True)
    SubmissionFactory(queued_at=now + timedelta(seconds=1))  # behind

    client.force_login(alice)
    yours = cpu_row(client)["yours"]
    # Behind the admin's 7 waiting re-runs and the other team's submission.
    assert [(p["submission"], p["status"], p["position"]) for p in yours] == [
        (mine.pk, "queued", 9),
        (running.pk, "running", None),
    ]
    page = client.get(reverse("ops:queue")).content.decode()
    assert f"#{mine.pk}</a>: 9th in line of 10 waiting" in page
    assert f"#{running.pk}</a>: running" in page

    client.force_login(charlie)
    assert cpu_row(client)["yours"] == []
    assert f"#{mine.pk}</a>" not in client.get(reverse("ops:queue")).content.decode()


def test_a_queued_submission_says_its_place_in_line(client, alice, team, keys):
    liveness.announce_worker(keys, profile="cpu", name="pkb-cpu@a")  # a host is connected
    now = timezone.now()
    SubmissionFactory(queued_at=now - timedelta(minutes=1))
    mine = SubmissionFactory(team=team, user=alice, queued_at=now)
    client.force_login(alice)
    html = client.get(reverse("submissions:status", args=[mine.pk])).content.decode()
    assert '<span class="queue-place">2nd in line</span>' in html


def test_a_teams_own_runs_in_the_queue_say_their_mode(client, alice, team):
    test_run = SubmissionFactory(team=team, user=alice, mode="test")
    client.force_login(alice)
    [place] = cpu_row(client)["yours"]
    assert (place["submission"], place["mode"]) == (test_run.pk, "test")
    page = client.get(reverse("ops:queue")).content.decode()
    assert f"#{test_run.pk}</a> (test run): 1st in line" in page


def test_the_admin_queue_says_what_its_list_holds_beside_the_summary(client, admin, eight_reruns):
    client.force_login(admin)
    page = client.get(reverse("admin:submissions_activesubmission_changelist")).content.decode()
    assert "0 queue" not in page
    count = page[page.index('id="queue-count"') :]
    count = count[: count.index("</p>")]
    assert "0 submissions queued or running; 8 re-runs for the ranking beside them" in count


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        ({}, "queued"),
        ({"running": True, "progress_total": 0}, "starting"),
        ({"running": True, "progress_total": 0, "progress_phase": "compiling"}, "compiling"),
        ({"running": True, "progress_total": 3, "progress_done": 1}, "1 / 3"),
    ],
)
def test_the_admin_queue_says_where_each_run_stands_as_its_page_does(
    client, admin, team, alice, state, shown
):
    """No "0 / 8" before the host has compiled anything (issue 40, item 9)."""
    SubmissionFactory(team=team, user=alice, **state)
    client.force_login(admin)
    page = client.get(reverse("admin:submissions_activesubmission_changelist")).content.decode()
    cell = page[page.index('class="field-progress"') :]
    assert cell[cell.index(">") + 1 : cell.index("</td>")] == shown
