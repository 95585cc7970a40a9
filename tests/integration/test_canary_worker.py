"""A real evaluator worker on the real Redis whose canary reads out of bounds: it takes no
ranked work (the evaluation waits in its queue) until a later canary reads in bounds, then
takes it; a test-mode evaluation, which never counts, is judged meanwhile. The canary's
candidate is a real bundle: a slowed copy of the reference, then the reference itself."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis

from evaluator.contract import EVALUATE_TASK, EvaluationRequest, Mode
from evaluator.host import liveness
from evaluator.host.profiles import get_profile
from evaluator.judge.canary import REFERENCE_SOURCE
from portal.celery import app as celery_app
from tests.evaluator.scratch import reachable_folder
from tests.evaluator.test_canary import SLOWED
from tests.integration.conftest import REPO, _start, _stop

pytestmark = pytest.mark.integration

DEADLINE_S = 180
WORKER = f"pkb-cpu@{socket.gethostname()}"


def _reading(client: redis.Redis, after: float, log: Path) -> dict:
    """The first canary reading judged after `after`."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        raw = client.get(liveness.canary_key("cpu", WORKER))
        if raw is not None and json.loads(raw)["judged_at"] > after:
            return json.loads(raw)
        time.sleep(0.2)
    raise AssertionError(f"no canary reading\n{log.read_text()[-3000:]}")


def _queued(client: redis.Redis, *, unranked: bool = False) -> int:
    """Messages in the cpu profile's ranked queue, or its unranked one (with their
    priority lists)."""
    keys = client.scan_iter("eval.cpu*")
    return sum(client.llen(k) for k in keys if k.startswith(b"eval.cpu.unranked") == unranked)


def _send(mode: Mode) -> EvaluationRequest:
    request = EvaluationRequest.build(
        evaluation_id=str(uuid.uuid4()),
        submission_id=1,
        profile="cpu",
        bundle_name="all-reduce.py",
        bundle=(REPO / "examples/pytorch/all-reduce.py").read_bytes(),
        problems=["all-reduce"],
        mode=mode,
    )
    queue = get_profile("cpu").queue_for(mode)
    celery_app.send_task(
        EVALUATE_TASK, args=[request.to_json()], queue=queue, task_id=request.evaluation_id
    )
    return request


def _wait_reported(client: redis.Redis, request: EvaluationRequest, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    reported = liveness.reported_key(request.evaluation_id)
    while not client.exists(reported) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.exists(reported), log.read_text()[-3000:]


def test_a_worker_out_of_bounds_takes_no_ranked_work_until_its_canary_reads_in_bounds(
    broker_url, tmp_path
):
    client = redis.Redis.from_url(broker_url)
    request, trial = _send(Mode.RANKED), _send(Mode.TEST)
    candidate, log = tmp_path / "candidate.py", tmp_path / "evaluator.log"
    candidate.write_text(SLOWED)
    with reachable_folder("canary-worker") as scratch:
        env = {
            **os.environ,
            "REDIS_URL": broker_url,
            "PKB_PROFILE": "cpu",
            "PKB_SEED_SECRET": "canary-worker-secret",
            "PKB_SCRATCH_DIR": str(scratch),
            "PKB_CANARY_INTERVAL_S": "3600",
            "PKB_CANARY_RECHECK_S": "1",
            "PYTHONUNBUFFERED": "1",
        }
        began = time.time()
        worker = _start(
            [sys.executable, "-m", "tests.integration.canary_worker", str(candidate)], env, log
        )
        try:
            out = _reading(client, began, log)
            assert out["in_bounds"] is False and out["out_since"] == out["judged_at"]
            # Retaken at once, no work meanwhile; confirmed, the test run is taken.
            assert _queued(client, unranked=True) == 1
            out = _reading(client, out["judged_at"], log)
            assert out["in_bounds"] is False
            _wait_reported(client, trial, log)
            assert _queued(client, unranked=True) == 0
            # The worker has been up all along: the ranked evaluation still waits for a host.
            assert _queued(client) == 1
            assert client.get(liveness.claim_key(request.evaluation_id)) is None
            candidate.write_text(REFERENCE_SOURCE)
            back = _reading(client, out["judged_at"], log)
            while back["in_bounds"] is False:  # the recheck that began before the change
                assert _queued(client) == 1
                back = _reading(client, back["judged_at"], log)
            assert back["out_since"] is None
            _wait_reported(client, request, log)
            assert _queued(client) == 0
        finally:
            _stop(worker)
    text = log.read_text()
    assert "OUT OF BOUNDS" in text and "Started consuming from eval.cpu" in text
