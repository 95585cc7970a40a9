"""The production web server: gunicorn with debug off on PostgreSQL, as deploy/ runs it.

It serves pages, its 404 page and whitenoise's hashed, compressed static files (the
favicon too) with far-future cache headers, answers the load balancer's health check, and
its /metrics count a submission made through the API.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from portal.accounts.services import team_create
from portal.api.services import api_token_create
from portal.problems.services import problems_sync
from tests.integration.conftest import REPO, _start, _stop, _test_database_url
from tests.portal.bundles import solving

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BIN = Path(sys.executable).parent
STARTUP_DEADLINE_S = 60
METRICS_TOKEN = "scrape-token-for-the-test"
# What the TLS proxy adds to every request it forwards (deploy/nginx.conf).
FROM_PROXY = {"X-Forwarded-Proto": "https"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _production_env(tmp_path: Path, broker_url: str, port: int) -> dict[str, str]:
    # Not under pytest (PYTEST_VERSION): the settings are production's, manifest included.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PKB_"))}
    env.update(
        DATABASE_URL=_test_database_url(),
        REDIS_URL=broker_url,
        PKB_DEBUG="false",
        PKB_SECRET_KEY="production-test-secret-key-" + "x" * 32,
        PKB_ALLOWED_HOSTS="127.0.0.1",
        PKB_CSRF_TRUSTED_ORIGINS=f"https://127.0.0.1:{port}",
        PKB_SECURE_COOKIES="true",
        PKB_HSTS_SECONDS="31536000",
        PKB_SSL_REDIRECT="true",
        PKB_STATIC_ROOT=str(tmp_path / "static"),
        PKB_MEDIA_ROOT=str(tmp_path / "media"),
        PKB_METRICS_TOKEN=METRICS_TOKEN,
        PKB_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="2",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def gunicorn(broker_url, tmp_path) -> Iterator[httpx.Client]:
    if connection.vendor != "postgresql":
        pytest.skip("production runs on PostgreSQL: set DATABASE_URL=postgres://... (CI does)")
    port = _free_port()
    env = _production_env(tmp_path, broker_url, port)
    subprocess.run(
        [str(BIN / "python"), "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=REPO,
        env=env,
        check=True,
    )
    log = tmp_path / "gunicorn.log"
    proc = _start([str(BIN / "gunicorn"), "--config", "deploy/gunicorn.conf.py"], env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/health/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)  # polling a port that is not open yet, up to the deadline
        else:
            pytest.fail(f"gunicorn did not answer:\n{log.read_text()[-4000:]}")
        with httpx.Client(base_url=base, headers=FROM_PROXY, timeout=10) as client:
            yield client
    finally:
        _stop(proc)


def test_gunicorn_serves_pages_hashed_static_files_and_health(gunicorn):
    home = gunicorn.get("/")
    assert home.status_code == 200, home.text[:2000]
    assert home.headers["strict-transport-security"] == "max-age=31536000"
    [css] = re.findall(r'href="(/static/css/site\.[0-9a-f]{12}\.css)"', home.text)

    static = gunicorn.get(css, headers={"Accept-Encoding": "gzip"})
    assert static.status_code == 200 and "font" in static.text
    assert static.headers["content-encoding"] == "gzip"
    assert static.headers["cache-control"] == "max-age=315360000, public, immutable"
    # The unhashed name still answers, but is never cached for long.
    assert "immutable" not in gunicorn.get("/static/css/site.css").headers["cache-control"]

    login = gunicorn.get("/accounts/login/")
    assert login.status_code == 200
    assert "secure" in login.headers["set-cookie"].lower()

    # The favicon: hashed and served by whitenoise like the rest; /favicon.ico leads to it.
    [icon] = re.findall(r'<link rel="icon" href="(/static/favicon\.[0-9a-f]{12}\.svg)"', home.text)
    favicon = gunicorn.get(icon)
    assert favicon.status_code == 200 and favicon.headers["content-type"] == "image/svg+xml"
    assert "immutable" in favicon.headers["cache-control"]
    assert gunicorn.get("/favicon.ico").headers["location"] == icon

    # Debug is off: an unknown page is the site's 404 in its layout, and plain HTTP is sent
    # to HTTPS...
    missing = gunicorn.get("/no-such-page/")
    assert missing.status_code == 404 and "Django tried these URL patterns" not in missing.text
    assert "Page not found" in missing.text and css in missing.text
    plain = httpx.get(gunicorn.base_url.join("/problems/"), follow_redirects=False)
    assert plain.status_code == 301 and plain.headers["location"].startswith("https://")

    # ...except the load balancer's health check, which may come over plain HTTP.
    health = httpx.get(gunicorn.base_url.join("/health/"))
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}

    # A request line past gunicorn's limit_request_line: the 414 the API schema documents,
    # answered by gunicorn itself with an HTML page.
    # (/health/ ignores its query; the API refuses parameters it does not take, and its
    # problem list takes none: a line just as long, just under the limit.)
    assert gunicorn.get("/health/?padding=" + "1" * 4005).status_code == 200
    too_long = gunicorn.get("/api/problems/?limit=" + "1" * 4100)
    assert too_long.status_code == 414 and too_long.headers["content-type"] == "text/html"


def test_metrics_show_the_queue_depth_after_a_submission(gunicorn):
    problems_sync()
    alice = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team_create(owner=alice, name="Alice's Kernels")
    _, token = api_token_create(user=alice, name="laptop")

    submitted = gunicorn.post(
        "/api/submissions/",
        headers={"Authorization": f"Token {token}"},
        files={"bundle": ("bundle.zip", solving("all-reduce"), "application/zip")},
    )
    assert submitted.status_code == 201, submitted.text

    assert gunicorn.get("/metrics").status_code == 401
    metrics = gunicorn.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert metrics.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.text)
        for s in family.samples
    }
    assert samples[("pkb_queue_depth", (("profile", "cpu"),))] == 1
    assert samples[("pkb_submissions", (("profile", "cpu"), ("state", "queued")))] == 1
    # No worker runs here: the evaluation request waits in the broker.
    assert samples[("pkb_broker_queue_messages", (("queue", "eval.cpu"),))] == 1
