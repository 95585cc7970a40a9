"""The hosts' canaries on the queue page and on a queued submission's page: readings as the
worker's own code publishes them into the suite's real Redis, and whatever else may be
there (malformed, stale, unreachable) showing as "no reading", never as an error."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from django.urls import reverse

from evaluator.host import canary, liveness
from evaluator.host.profiles import get_profile
from evaluator.judge.canary import CaseReading, Reading
from portal.submissions import broker
from portal.submissions.models import Submission
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db

HOLD = "every connected one reads out of bounds on its same-code check"


class Gate:
    def pause(self) -> None: ...
    def resume(self, *, ranked: bool) -> None: ...


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


def host(client: redis.Redis, name: str, *, readings: list[tuple[float, float, float]]) -> None:
    """Worker `name` of the cpu profile connects and publishes its canary's readings, as
    evaluator/host/canary.py does (the bounds are the judge's own, at 5%)."""
    liveness.announce_worker(client, profile="cpu", name=name)
    watch = canary.Watch(
        plan=canary.CanaryPlan(interval_s=1800, recheck_s=300, tolerance=0.05),
        profile=get_profile("cpu"),
        worker=name,
        broker=lambda: client,
        scratch_dir=None,  # type: ignore[arg-type]  (nothing is judged here)
    )
    watch.attach(Gate())
    for median, low, high in readings:
        reading = Reading([CaseReading("n=16384", median, low, high, 8)], tolerance=0.05)
        watch.conclude(reading.to_json())


def queue_page(client) -> str:
    response = client.get(reverse("ops:queue"))
    assert response.status_code == 200
    return response.content.decode()


def test_the_queue_shows_each_hosts_same_code_reading(client, keys):
    host(keys, "pkb-cpu@a", readings=[(1.01, 0.97, 1.04)])
    host(keys, "pkb-cpu@b", readings=[(0.80, 0.75, 0.84), (0.81, 0.76, 0.85)])
    html = queue_page(client)
    assert "same code 1.01x (0.97–1.04), 0\xa0minutes ago, in bounds" in html
    assert (
        "same code 0.81x (0.76–0.85), 0\xa0minutes ago, <strong>out of bounds</strong> since"
        in html
    )
    assert ": takes no ranked work" in html
    rows = {r["profile"]: r for r in client.get(reverse("ops:queue-json")).json()["profiles"]}
    hosts = {h["worker"]: h for h in rows["cpu"]["hosts"]}
    assert hosts["pkb-cpu@a"]["in_bounds"] is True and hosts["pkb-cpu@a"]["out_since"] is None
    assert hosts["pkb-cpu@b"]["in_bounds"] is False and hosts["pkb-cpu@b"]["out_since"]
    assert rows["h200x4"]["hosts"] == []


def test_a_host_that_left_is_not_shown(client, keys):
    host(keys, "pkb-cpu@gone", readings=[(1.0, 0.9, 1.1)])
    keys.zadd(liveness.workers_key("cpu"), {"pkb-cpu@gone": time.time() - 3600})
    assert "pkb-cpu@gone" not in queue_page(client)


@pytest.mark.parametrize(
    "stored",
    [
        b"\xff\xfe not json",
        b"[" * 100_000,
        b"[1, 2, 3]",
        b'{"in_bounds": "yes", "judged_at": 1}',
        json.dumps({"in_bounds": True, "judged_at": "now", "cases": []}).encode(),
        b'{"in_bounds": true, "judged_at": NaN, "stale_after": 1e300, "cases": []}',
        json.dumps(
            {"in_bounds": False, "judged_at": 1.0, "stale_after": 9e11, "cases": [{"case": 1}]}
        ).encode(),
        # A stale reading: the worker stopped judging long ago.
        json.dumps(
            {
                "in_bounds": False,
                "judged_at": 1.0,
                "stale_after": 2.0,
                "cases": [{"case": "n=1", "median": 0.5, "low": 0.4, "high": 0.6}],
            }
        ).encode(),
    ],
)
def test_bad_or_stale_readings_show_as_no_reading(client, keys, alice, team, stored):
    liveness.announce_worker(keys, profile="cpu", name="pkb-cpu@odd")
    keys.set(liveness.canary_key("cpu", "pkb-cpu@odd"), stored)
    html = queue_page(client)
    assert "pkb-cpu@odd" in html and "no reading" in html
    waiting = SubmissionFactory(team=team, user=alice)
    client.force_login(alice)
    page = client.get(reverse("submissions:detail", args=[waiting.pk]))
    assert page.status_code == 200 and HOLD not in page.content.decode()


def test_pages_work_without_the_broker(client, settings, alice, team):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert "no reading" not in queue_page(client)
    waiting = SubmissionFactory(team=team, user=alice)
    client.force_login(alice)
    assert client.get(reverse("submissions:detail", args=[waiting.pk])).status_code == 200


def test_a_queued_submission_says_it_waits_for_hosts_out_of_bounds(client, keys, alice, team):
    waiting = SubmissionFactory(team=team, user=alice)
    client.force_login(alice)
    urls = [
        reverse(name, args=[waiting.pk]) for name in ("submissions:detail", "submissions:status")
    ]
    host(keys, "pkb-cpu@a", readings=[(0.80, 0.75, 0.84)])
    host(keys, "pkb-cpu@b", readings=[(1.30, 1.20, 1.40)])
    for url in urls:
        html = client.get(url).content.decode()
        assert f"waiting for a CPU, 4 ranks over gloo host: {HOLD}" in html
        assert "<code>pkb-cpu@a</code>: same code 0.80x (0.75–0.84), out of bounds since" in html
        assert "<code>pkb-cpu@b</code>: same code 1.30x (1.20–1.40)" in html
    # One host back in bounds takes work again: nothing holds the submission back.
    host(keys, "pkb-cpu@b", readings=[(1.00, 0.98, 1.02)])
    for url in urls:
        html = client.get(url).content.decode()
        assert HOLD not in html and "waiting for a CPU, 4 ranks over gloo host" in html
    # A running submission is past waiting.
    running = SubmissionFactory(team=team, user=alice, running=True)
    host(keys, "pkb-cpu@b", readings=[(0.5, 0.4, 0.6)])
    html = client.get(reverse("submissions:detail", args=[running.pk])).content.decode()
    assert HOLD not in html
    # A test run is not held back: hosts out of bounds still take the modes that never count.
    trial = SubmissionFactory(team=team, user=alice, mode=Submission.Mode.TEST)
    html = client.get(reverse("submissions:detail", args=[trial.pk])).content.decode()
    assert HOLD not in html and "waiting for a CPU, 4 ranks over gloo host" in html
