"""Several evaluator workers on one host, as `python -m evaluator.host.hostplan` plans them:
real worker processes, side by side on one broker, on CPU with fake device sets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluator.host.hostplan import plan_host, write_env_files
from portal.celery import app as celery_app
from tests.integration.conftest import BIN, REPO, _start, _stop

pytestmark = pytest.mark.integration

DEADLINE_S = 120


def _env_file(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and line[0] != "#"]
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    # Bundle code may run as another user (nobody) when the suite runs as root: a worker
    # checks at start-up that it can reach its scratch folder, which tmp_path is not.
    folder = Path(tempfile.mkdtemp(prefix="pkb-host-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in folder.glob("*.log"))


def test_two_workers_of_one_host_serve_side_by_side_under_their_own_names(
    broker_url, tmp_path, open_tmp
):
    slots = plan_host(["cpu", "cpu"], gpus=[], scratch_root=open_tmp / "scratch")
    files = write_env_files(slots, tmp_path / "workers")
    base = {**os.environ, "REDIS_URL": broker_url, "PKB_SEED_SECRET": "host-workers-secret"}
    procs = []
    try:
        for slot, path in zip(slots, files, strict=True):
            env = base | _env_file(path)
            env.pop("PKB_CANDIDATE_USER")  # the suite's default user, as make run has
            procs.append(_start([str(BIN / "pkb-worker")], env, tmp_path / f"{slot.name}.log"))
        wanted = {f"pkb-{slot.name}@{socket.gethostname()}" for slot in slots}
        answered: set[str] = set()
        deadline = time.monotonic() + DEADLINE_S
        while not wanted <= answered and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), _logs(tmp_path)
            # Celery's broadcast ping over the broker; other workers may answer too.
            answered |= {name for reply in celery_app.control.ping(timeout=1) for name in reply}
        assert wanted <= answered, _logs(tmp_path)
        for slot in slots:
            log = (tmp_path / f"{slot.name}.log").read_text()
            assert "DuplicateNodenameWarning" not in log
    finally:
        for proc in procs:
            _stop(proc)


def test_a_gpu_worker_pinned_to_too_few_gpus_refuses_to_start(tmp_path):
    [slot] = plan_host(["h200x2"], gpus=[0, 1])
    env = {**os.environ, **slot.env(), "CUDA_VISIBLE_DEVICES": "1", "REDIS_URL": "redis://x"}
    env.pop("PKB_CANDIDATE_USER")
    done = subprocess.run(
        [str(BIN / "pkb-worker")], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "CUDA_VISIBLE_DEVICES='1' pins 1 GPUs; profile h200x2 needs 2" in done.stderr
