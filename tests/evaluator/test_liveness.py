"""A host's side of liveness: skipping attempts the portal called off, stepping aside for
a copy already running, heartbeats, and a stop that kills the ranks within seconds. The
signals live in a real Redis (the suite's own database), the ranks are real gloo ranks."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from evaluator.contract import FINISHED_TASK, PROGRESS_TASK, STARTED_TASK
from evaluator.host import liveness
from evaluator.host.liveness import Attempt
from evaluator.host.run import run_evaluation
from evaluator.judge import stopping
from tests.evaluator import samples
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import noted_pid_running, reachable_folder
from tests.evaluator.test_tasks import PROFILE, SETTINGS, Recorder, request

SLEEPS = """
import time
from _notes import note_pid

def solution(x):
    note_pid("sleeping")
    time.sleep(600)
    return x
"""
STOP_WITHIN_S = 10


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    client = liveness.client(os.environ.get("PKB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    yield client
    keys = list(client.scan_iter("pkb:*"))
    if keys:
        client.delete(*keys)


def attempt_of(broker: redis.Redis, owner: str = "host-a:1") -> Attempt:
    return Attempt(broker, str(uuid.uuid4()), owner=owner, lease_s=60)


def run(
    request_json: dict, attempt: Attempt, heartbeat_s: float | None = None, shared=()
) -> Recorder:
    send = Recorder()
    send.returned = run_evaluation(
        request_json,
        settings=dataclasses.replace(SETTINGS, sandbox_shared=tuple(shared)),
        send=send,
        profile=PROFILE,
        problems=samples.CATALOG,
        attempt=attempt,
        heartbeat_s=heartbeat_s,
    )
    return send


def plain(attempt: Attempt, **changes) -> dict:
    bundle = make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN})
    return request(bundle, evaluation_id=attempt.evaluation_id, **changes)


def test_an_attempt_called_off_before_it_starts_is_skipped(broker):
    attempt = attempt_of(broker)
    broker.set(liveness.stop_key(attempt.evaluation_id), "cancelled")
    send = run(plain(attempt), attempt)
    assert send.sent == [] and send.returned is None


def test_a_second_copy_of_a_running_attempt_steps_aside(broker):
    running = attempt_of(broker, owner="host-a:1")
    assert running.claim() == ""
    copy = Attempt(broker, running.evaluation_id, owner="host-b:2", lease_s=60)
    send = run(plain(copy), copy)
    assert send.sent == [] and send.returned is None


def test_a_judged_attempt_releases_its_claim(broker):
    attempt = attempt_of(broker)
    send = run(plain(attempt), attempt)
    # Progress: compiling, judging the one problem, judged (with its result).
    assert send.names == [STARTED_TASK, *[PROGRESS_TASK] * 3, FINISHED_TASK]
    assert broker.get(liveness.claim_key(attempt.evaluation_id)) is None


def _sleeping_ranks(notes: Path, deadline_s: float = 120) -> list[int]:
    """The pids of the candidate ranks, once every one of them is inside the solution."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pids = {int(p.name.rsplit("-", 1)[1]) for p in notes.glob("sleeping-*")}
        if len(pids) == PROFILE.world_size:
            return sorted(pids)
        time.sleep(0.05)
    raise AssertionError("the candidate ranks never reached the solution")


def test_a_stop_kills_the_ranks_within_seconds_and_sends_no_result(broker):
    attempt = attempt_of(broker)
    seen: dict[str, object] = {}
    with reachable_folder("liveness-notes", candidates_write=True) as notes:
        bundle = make_zip(
            {"ar-hangs.py": SLEEPS, "_notes.py": samples.NOTES.format(pid_dir=str(notes))}
        )
        request_json = request(bundle, evaluation_id=attempt.evaluation_id, problems=["ar-hangs"])

        def cancel_once_ranks_run() -> None:
            seen["pids"] = pids = _sleeping_ranks(notes)
            time.sleep(1.5)  # long enough for a heartbeat or two at 0.5 s
            broker.set(liveness.stop_key(attempt.evaluation_id), "cancelled")
            seen["stopped_at"] = time.monotonic()
            seen["pids_alive_at_stop"] = [p for p in pids if noted_pid_running(p)]

        canceller = threading.Thread(target=cancel_once_ranks_run, daemon=True)
        canceller.start()
        send = run(request_json, attempt, heartbeat_s=0.5, shared=[notes])
        returned_at = time.monotonic()
        canceller.join(5)
    assert send.returned is None
    assert seen["pids_alive_at_stop"], "the ranks were not running when the stop came"
    assert returned_at - seen["stopped_at"] < STOP_WITHIN_S
    assert not [p for p in seen["pids"] if noted_pid_running(p)]
    assert FINISHED_TASK not in send.names
    # The ranks' silence is no reason to stop the heartbeats: the watch resends progress.
    assert send.names.count(PROGRESS_TASK) >= 2


def test_a_stop_ends_with_its_evaluation(broker):
    stopped = attempt_of(broker)
    broker.set(liveness.stop_key(stopped.evaluation_id), "cancelled")
    run(plain(stopped), stopped)
    stopping.raise_if_stopped()  # nothing left over for the next evaluation of this process
    fresh = attempt_of(broker)
    assert run(plain(fresh), fresh).names[-1] == FINISHED_TASK
