"""Real workers on the real Redis, sharing the test database with this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from portal.celery import app as celery_app

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _test_database_url() -> str:
    """The URL of the database pytest-django made, for the worker processes."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


@pytest.fixture
def broker_url() -> Iterator[str]:
    """The suite's own Redis database (settings), emptied so no stale message leaks in."""
    url = settings.CELERY_BROKER_URL
    assert url == celery_app.conf.broker_url
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        args,
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so that teardown can stop it with everything it started
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def workers(broker_url, tmp_path) -> Iterator[dict[str, Path]]:
    """The portal's worker and one CPU evaluator worker, as `make run` starts them."""
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": broker_url,
        "PKB_TEST_REDIS_URL": broker_url,
        "PKB_PROFILE": "cpu",
        "PKB_SEED_SECRET": "integration-test-secret",
        "PKB_PROBLEM_TIMEOUT_S": "60",
        "PYTHONUNBUFFERED": "1",
    }
    logs = {"portal": tmp_path / "portal.log", "evaluator": tmp_path / "evaluator.log"}
    procs = [
        _start(
            [
                str(BIN / "celery"),
                "--app",
                "portal",
                "worker",
                "--queues",
                "portal",
                "--concurrency",
                "1",
                "--pool",
                "solo",
                "--loglevel",
                "INFO",
            ],
            env,
            logs["portal"],
        ),
        _start([str(BIN / "pkb-worker")], env, logs["evaluator"]),
    ]
    try:
        yield logs
    finally:
        for proc in procs:
            _stop(proc)
