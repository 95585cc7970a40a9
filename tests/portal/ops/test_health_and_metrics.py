"""The load balancer's health check, the queue view and /metrics, on the real database and
the suite's real Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from evaluator.host import liveness
from portal.submissions.models import Submission
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


def _samples(response) -> dict[tuple[str, tuple], float]:
    text = response.content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_health_is_ok_when_the_database_and_broker_answer(client):
    response = client.get(reverse("ops:health"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}
    assert "no-cache" in response["Cache-Control"]


def test_health_is_503_when_the_broker_is_unreachable(client, settings):
    # A port nothing listens on: a real refused connection, not a mock.
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get(reverse("ops:health"))
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "broker": "unreachable"},
    }


def test_health_rejects_writes(client):
    assert client.post(reverse("ops:health")).status_code == 405


def test_the_queue_shows_depth_and_oldest_wait_per_profile(client):
    now = timezone.now()
    SubmissionFactory(queued_at=now - timedelta(minutes=30))
    SubmissionFactory(queued_at=now - timedelta(minutes=5))
    SubmissionFactory(running=True)
    SubmissionFactory(profile="h200x4", queued_at=now - timedelta(hours=2))

    rows = {r["profile"]: r for r in client.get(reverse("ops:queue-json")).json()["profiles"]}
    assert (rows["cpu"]["queued"], rows["cpu"]["running"]) == (2, 1)
    assert 30 * 60 <= rows["cpu"]["oldest_wait_s"] < 31 * 60
    assert rows["h200x4"]["queued"] == 1 and rows["h200x4"]["oldest_wait_s"] >= 2 * 3600
    assert rows["h200x2"] == {
        "profile": "h200x2",
        "label": "2x H200 (NVLink)",
        "queued": 0,
        "running": 0,
        "reruns_queued": 0,  # re-runs count too (test_queue.py)
        "reruns_running": 0,
        "oldest_wait_s": None,
        "workers": 0,  # hosts connected now (test_queue.py)
        "hosts": [],  # connected hosts and their canaries (test_canaries.py)
        "yours": [],  # the viewer's team's evaluations (test_queue.py)
    }

    page = client.get(reverse("ops:queue")).content.decode()
    assert "4x H200 (NVLink)" in page and "2\xa0hours" in page
    assert "none waiting" in page  # the idle profiles


def test_every_page_links_to_the_queue(client):
    home = client.get(reverse("leaderboard:home")).content.decode()
    assert f'href="{reverse("ops:queue")}"' in home


def test_metrics_count_the_queue_states_durations_and_heartbeats(client):
    now = timezone.now()
    SubmissionFactory.create_batch(2)
    SubmissionFactory(running=True, host="gpu-a", heartbeat_at=now - timedelta(seconds=40))
    SubmissionFactory(
        done=True, started_at=now - timedelta(seconds=90), finished_at=now - timedelta(seconds=45)
    )
    SubmissionFactory(
        status=Submission.Status.FAILED,
        started_at=now - timedelta(seconds=700),
        finished_at=now,
    )

    response = client.get(reverse("ops:metrics"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = _samples(response)
    cpu = (("profile", "cpu"),)
    assert samples[("pkb_queue_depth", cpu)] == 2
    assert samples[("pkb_queue_running", cpu)] == 1
    assert samples[("pkb_submissions", (("profile", "cpu"), ("state", "done")))] == 1
    assert samples[("pkb_submissions", (("profile", "cpu"), ("state", "failed")))] == 1
    assert samples[("pkb_submissions", (("profile", "h200x4"), ("state", "queued")))] == 0
    # 45 s and 700 s: one in the 60 s bucket, both by 1200 s.
    bucket = "pkb_evaluation_duration_seconds_bucket"
    assert samples[(bucket, (("le", "30.0"), ("profile", "cpu")))] == 0
    assert samples[(bucket, (("le", "60.0"), ("profile", "cpu")))] == 1
    assert samples[(bucket, (("le", "1200.0"), ("profile", "cpu")))] == 2
    assert samples[(bucket, (("le", "+Inf"), ("profile", "cpu")))] == 2
    assert samples[("pkb_evaluation_duration_seconds_sum", cpu)] == pytest.approx(745, abs=1)
    heartbeat = samples[
        ("pkb_evaluation_last_heartbeat_timestamp_seconds", (("host", "gpu-a"), ("profile", "cpu")))
    ]
    assert heartbeat == pytest.approx((now - timedelta(seconds=40)).timestamp(), abs=1)
    assert samples[("pkb_broker_up", ())] == 1


def test_metrics_read_the_broker_queues_and_worker_heartbeats(client, settings):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    keys = ("gpu.h200x8", liveness.workers_key("h200x8"))
    broker.delete(*keys)
    broker.rpush("gpu.h200x8", b"{}", b"{}", b"{}")
    liveness.announce_worker(broker, profile="h200x8", name="pkb-h200x8-0@gpu-b", now=1.8e9)
    try:
        samples = _samples(client.get(reverse("ops:metrics")))
    finally:
        broker.delete(*keys)
    assert samples[("pkb_broker_queue_messages", (("queue", "gpu.h200x8"),))] == 3
    worker = (("profile", "h200x8"), ("worker", "pkb-h200x8-0@gpu-b"))
    assert samples[("pkb_worker_heartbeat_timestamp_seconds", worker)] == 1.8e9


def test_metrics_without_a_broker_say_so_and_still_count_the_database(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    SubmissionFactory()
    samples = _samples(client.get(reverse("ops:metrics")))
    assert samples[("pkb_broker_up", ())] == 0
    assert samples[("pkb_queue_depth", (("profile", "cpu"),))] == 1


def test_metrics_need_the_token_when_one_is_set(client, settings):
    settings.PKB_METRICS_TOKEN = "scrape-secret"
    url = reverse("ops:metrics")
    assert client.get(url).status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    assert client.post(url, HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 405
