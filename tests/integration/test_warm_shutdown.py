"""Upgrades without losing work: SIGTERM makes a worker finish its evaluation, then stop.

systemd (KillMode=mixed) and `docker stop` send SIGTERM to the worker's main process only;
Celery's warm shutdown then stops taking tasks, lets the running one finish and acknowledge,
and exits. Nothing is lost (the next submission waits in the broker for the next worker)
and nothing is judged twice (the finished one is acknowledged, so never redelivered).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.contrib.auth import get_user_model

from evaluator.host.hostplan import plan_host
from portal.accounts.services import team_create
from portal.problems.services import problems_sync
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import submission_create
from tests.integration.conftest import BIN, _start, _stop, _test_database_url
from tests.portal.bundles import upload, zip_bundle

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DEADLINE_S = 120

# At its first call, rank 0 writes where its file lies (inside the scratch folder of the
# worker running it) to `started`; then every rank waits until the test opens the gate, so
# the evaluation is surely running when the worker is told to stop.
GATED_ALL_REDUCE = """
import os
import time

import torch.distributed as dist

HERE = os.path.abspath(__file__)


def solution(x):
    if dist.get_rank() == 0 and not os.path.exists({started!r}):
        with open({started!r} + ".part", "w") as out:
            out.write(HERE)
        os.replace({started!r} + ".part", {started!r})
    while not os.path.exists({gate!r}):
        time.sleep(0.02)
    dist.all_reduce(x)
    return x
"""


def _wait_for(what: str, condition, logs: dict[str, Path], alive=()) -> None:
    # Other processes do the work: poll what they leave behind, up to a deadline, and stop
    # at once when a process that should be doing it has died.
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and all(p.poll() is None for p in alive):
        if condition():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {name}\n{log.read_text()[-3000:]}" for name, log in logs.items())
    pytest.fail(f"gave up waiting until {what}\n{tails}")


def _received(log: Path) -> int:
    return len(re.findall(r"Task evaluator\.evaluate\[[^\]]+\] received", log.read_text()))


def _status(pk: int) -> str:
    return Submission.objects.get(pk=pk).status


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    # Under /tmp and writable by all (sticky): bundle code may run as another user (nobody)
    # when the suite runs as root, and pytest's own tmp_path is private to the suite's user.
    folder = Path(tempfile.mkdtemp(prefix="pkb-warm-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _submit(user, *, gate: Path, started: Path) -> int:
    source = GATED_ALL_REDUCE.format(gate=str(gate), started=str(started))
    return submission_create(user=user, upload=upload(zip_bundle({"all-reduce.py": source}))).pk


def _ran_on(started: Path, worker: str) -> None:
    # Another test run sharing the suite's Redis database could have taken it instead.
    where = started.read_text()
    assert f"/scratch/{worker}/" in where, f"not evaluated by worker {worker}: {where}"


@pytest.fixture
def cluster(broker_url, tmp_path, shared_tmp) -> Iterator[dict]:
    """The portal's worker, and a way to start evaluator workers planned for one host."""
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": broker_url,
        "PKB_TEST_REDIS_URL": broker_url,
        "PKB_SEED_SECRET": "warm-shutdown-test-secret",
        "PKB_PROBLEM_TIMEOUT_S": "90",
        "PKB_TRIALS": "1",
        "PKB_WARMUP": "0",
        "PKB_ITERS": "2",
        "PKB_ROUNDS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    logs = {"portal": tmp_path / "portal.log"}
    procs = [
        _start(
            [str(BIN / "celery"), "--app", "portal", "worker", "--queues", "portal"]
            + ["--concurrency", "1", "--pool", "solo", "--loglevel", "INFO"],
            env,
            logs["portal"],
        )
    ]
    # Two CPU workers as one host would run them: their own names and scratch folders.
    slots = plan_host(["cpu", "cpu"], gpus=[], scratch_root=shared_tmp / "scratch")

    def start_worker(index: int) -> subprocess.Popen:
        slot = slots[index]
        worker_env = env | slot.env()
        worker_env.pop("PKB_CANDIDATE_USER")  # the suite's default user, as make run has
        worker_env["PKB_SANDBOX_SHARED"] = str(shared_tmp)  # the gate, through the sandbox
        logs[slot.name] = tmp_path / f"{slot.name}.log"
        proc = _start([str(BIN / "pkb-worker")], worker_env, logs[slot.name])
        procs.append(proc)
        return proc

    try:
        yield {"start_worker": start_worker, "logs": logs, "names": [s.name for s in slots]}
    finally:
        for proc in procs:
            _stop(proc)


def test_a_stopped_worker_finishes_its_evaluation_and_the_next_worker_takes_the_next(
    cluster, shared_tmp, broker_url
):
    gate = shared_tmp / "open"
    started = [shared_tmp / "started-first", shared_tmp / "started-second"]
    problems_sync()
    alice = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team_create(owner=alice, name="Alice's Kernels")
    first, second = (_submit(alice, gate=gate, started=marker) for marker in started)
    logs = cluster["logs"]
    name_a, name_b = cluster["names"]

    worker_a = cluster["start_worker"](0)
    _wait_for("worker A runs the first evaluation", started[0].exists, logs, [worker_a])
    _ran_on(started[0], name_a)
    os.kill(worker_a.pid, signal.SIGTERM)  # the main process only, as systemd and docker do
    _wait_for(
        "worker A begins its warm shutdown",
        lambda: "Warm shutdown" in logs[name_a].read_text(),
        logs,
        [worker_a],
    )
    assert _status(first) == "running", "SIGTERM arrived while the evaluation ran"

    gate.touch()
    assert worker_a.wait(timeout=DEADLINE_S) == 0, logs[name_a].read_text()[-3000:]
    _wait_for("the first evaluation is recorded", lambda: _status(first) == "done", logs)
    # Worker A is gone and did not take the second submission: it waits in the broker.
    assert _status(second) == "queued" and not started[1].exists()
    assert _received(logs[name_a]) == 1

    worker_b = cluster["start_worker"](1)
    _wait_for(
        "the second evaluation is recorded", lambda: _status(second) == "done", logs, [worker_b]
    )
    _ran_on(started[1], name_b)
    assert _received(logs[name_b]) == 1

    for pk in (first, second):
        submission = Submission.objects.get(pk=pk)
        assert submission.attempts == 1, submission.reason
        results = ProblemResult.objects.filter(submission=submission)
        assert [(r.problem.slug, r.status) for r in results] == [("all-reduce", "passed")], [
            r.message for r in results
        ]
    # Every message was acknowledged: nothing waits to be delivered, or redelivered, again.
    broker = redis.Redis.from_url(broker_url)
    assert broker.llen("eval.cpu") == 0
    assert broker.hlen("unacked") == 0
