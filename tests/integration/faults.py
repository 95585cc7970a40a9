"""Parts to break on purpose: a Redis of the test's own on its own port, started from the
redis-server binary, and real Celery workers started as subprocesses against it.

The workers get short liveness intervals through the environment (the same settings the
defaults are checked against by arithmetic); the test process publishes to the same Redis.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kombu.pools
import pytest
import redis

from portal.celery import app as celery_app
from tests.integration.conftest import BIN, REPO, _start, _stop, _test_database_url

# Short intervals for the tests (the defaults are 10 / 60 / 15 / 60 s).
FAST = {
    "PKB_HEARTBEAT_S": "1",
    "PKB_STUCK_AFTER_S": "4",
    "PKB_SWEEP_INTERVAL_S": "1",
    "PKB_VISIBILITY_TIMEOUT_S": "4",
}
# kombu checks for messages past their visibility timeout every 5 s (our setting).
RESTORE_CHECK_S = 5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class OwnRedis:
    """A redis-server of the test's own, which the test may kill and start again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, appendonly: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if appendonly else "no",
                "--dir",
                str(self.folder),
            ],
            stdout=(self.folder / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        wait_for(lambda: _answers(client), 10, "redis-server to answer")

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill does: nothing is saved on the way out."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False


def wait_for(
    condition: Callable[[], Any], timeout_s: float, what: str, logs: dict[str, Path] | None = None
) -> Any:
    """Poll `condition` (another process's doing: the only way is to look) until it holds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    tails = "\n".join(f"--- {k}\n{p.read_text()[-4000:]}" for k, p in (logs or {}).items())
    pytest.fail(f"waited {timeout_s} s for {what}\n{tails}")


class Workers:
    """The portal's worker (with the sweeper's beat) and CPU evaluator workers."""

    def __init__(self, folder: Path, broker_url: str, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "DATABASE_URL": _test_database_url(),
            "REDIS_URL": broker_url,
            "PKB_TEST_REDIS_URL": broker_url,
            "PKB_PROFILE": "cpu",
            "PKB_SEED_SECRET": "integration-test-secret",
            "PKB_PROBLEM_TIMEOUT_S": "120",
            "PKB_TRIALS": "1",
            "PKB_WARMUP": "0",
            "PKB_ITERS": "2",
            "PKB_ROUNDS": "1",
            "PYTHONUNBUFFERED": "1",
            **FAST,
            **env,
        }
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def portal(self, name: str = "portal") -> subprocess.Popen:
        args = [
            str(BIN / "celery"),
            "--app",
            "portal",
            "worker",
            "--queues",
            "portal",
            "--pool",
            "solo",
            "--beat",
            "--schedule",
            str(self.folder / f"{name}-beat"),
            "--hostname",
            f"{name}@%h",
            "--without-mingle",  # a second or two of start-up each, with nothing to learn
            "--without-gossip",
            "--loglevel",
            "INFO",
        ]
        return self._start(name, args)

    def evaluator(self, name: str = "evaluator") -> subprocess.Popen:
        return self._start(name, [str(BIN / "pkb-worker")], PKB_WORKER_NAME=name)

    def _start(self, name: str, args: list[str], **env: str) -> subprocess.Popen:
        self.logs[name] = self.folder / f"{name}.log"
        self.procs[name] = _start(args, {**self.env, **env}, self.logs[name])
        return self.procs[name]

    def kill(self, name: str) -> None:
        """SIGKILL the worker's whole session: main process, pool and beat alike (the ranks
        have their own process groups; the kernel kills them when their parent dies)."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def log(self, name: str) -> str:
        return self.logs[name].read_text()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            _stop(proc)


@contextmanager
def publishing_to(url: str) -> Iterator[None]:
    """Point this process's Celery app (what submission_create sends with) at `url`."""
    old = celery_app.conf.broker_url

    def switch(to: str) -> None:
        # The app's pool is kombu's process-wide pool for its URL: closing only that one
        # would leave a closed pool for the next test to draw from, so every pool is
        # closed and forgotten, and the next send opens a fresh one.
        kombu.pools.reset()
        celery_app._pool = None
        celery_app.amqp._producer_pool = None
        celery_app.conf.broker_url = to

    switch(url)
    try:
        yield
    finally:
        switch(old)


def received(log: str, evaluation_id: str) -> int:
    """How many times a worker took the task of this attempt (its id is the attempt's)."""
    return log.count(f"evaluator.evaluate[{evaluation_id}] received")


__all__ = ["REPO", "OwnRedis", "Workers", "publishing_to", "received", "wait_for"]
