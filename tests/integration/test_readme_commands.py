"""`make run` on a clean clone, as a new user runs it: the site answers and workers start.

`make test`, the other README command, is what CI runs on a clean clone (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STARTUP_DEADLINE_S = 600  # a fresh virtual environment is most of it


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


@pytest.fixture
def clean_clone(tmp_path) -> Path:
    if not (REPO / ".git").exists():
        pytest.skip("needs the git repository")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    return clone


def test_make_run_serves_the_site_with_its_workers(clean_clone, tmp_path):
    port = _free_port()
    # A new user's shell: none of this suite's settings.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "PKB_", "PYTEST_", "DJANGO_"))
    }
    env.update(PORT=str(port), REDIS_URL="redis://127.0.0.1:6379/14", PYTHONUNBUFFERED="1")
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(REPO))
    )
    log = tmp_path / "make-run.log"
    proc = subprocess.Popen(
        ["make", "run"],
        cwd=clean_clone,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        problems_page = None
        while time.monotonic() < deadline and proc.poll() is None:
            problems_page = _get(f"http://127.0.0.1:{port}/problems/")
            output = log.read_text(errors="replace")
            if problems_page and output.count(" ready.") >= 2:
                break
            time.sleep(1)
        output = log.read_text(errors="replace")
        assert problems_page, f"no site on port {port}:\n{output[-4000:]}"
        assert "all-reduce" in problems_page or "All-reduce" in problems_page
        assert output.count(" ready.") >= 2, f"workers not ready:\n{output[-4000:]}"
        home = _get(f"http://127.0.0.1:{port}/")
        assert home and "PyTorch" in home, "the leaderboard shows the reference baseline"
        assert (clean_clone / "var" / "db.sqlite3").exists(), "SQLite by default"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(clean_clone, ignore_errors=True)
