"""`make run` on a clean clone, as a new user runs it: the site answers and workers start;
and the README's `manage.py` commands in a new shell, with the `.env` that `make run` writes.

`make test`, the other README command, is what CI runs on a clean clone (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
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
        assert "PKB_SECRET_KEY=" in (clean_clone / ".env").read_text(), "for manage.py"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(clean_clone, ignore_errors=True)


# What manage.py needs of the checkout; a copy, so the repository's own .env is never read,
# written or removed.
MANAGE_PY_NEEDS = ("manage.py", "portal", "evaluator", "problems", "templates", "static")


@pytest.fixture
def checkout_copy(tmp_path) -> Path:
    copy = tmp_path / "checkout"
    copy.mkdir()
    for name in MANAGE_PY_NEEDS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy / name)
    (copy / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "ensure-env", copy / "scripts" / "ensure-env")
    return copy


def _new_shell(tmp_path: Path) -> dict[str, str]:
    """A new user's shell: no PKB_DEBUG, no secret key, not under pytest."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'readme.sqlite3'}",
        "DJANGO_SUPERUSER_PASSWORD": "a-long-enough-password-1",
    }


def _manage(copy: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_readme_manage_py_commands_work_in_a_new_shell_with_the_development_env(
    checkout_copy, tmp_path
):
    env = _new_shell(tmp_path)
    subprocess.run(
        [str(checkout_copy / "scripts" / "ensure-env"), sys.executable], check=True, env=env
    )
    dotenv = checkout_copy / ".env"
    assert dotenv.stat().st_mode & 0o077 == 0, "it holds a secret: the owner's alone"
    assert "PKB_DEBUG=1\nPKB_SECRET_KEY=" in dotenv.read_text()

    for command in (
        ["migrate", "--noinput", "--verbosity", "0"],
        ["createsuperuser", "--noinput", "--username", "admin", "--email", "a@example.org"],
    ):
        done = _manage(checkout_copy, env, *command)
        assert done.returncode == 0, f"manage.py {command[0]}:\n{done.stderr[-3000:]}"
    assert "Superuser created successfully." in done.stdout


def test_without_env_file_or_debug_manage_py_still_requires_a_secret_key(checkout_copy, tmp_path):
    """Production: no .env, debug off. The settings refuse to load, and say why."""
    env = _new_shell(tmp_path)
    for extra in ({}, {"PKB_DEBUG": "false"}):
        done = _manage(checkout_copy, env | extra, "check")
        assert done.returncode != 0
        assert "PKB_SECRET_KEY (or PKB_SECRET_KEY_FILE) is required" in done.stderr


def test_a_malformed_env_file_stops_manage_py_with_its_line(checkout_copy, tmp_path):
    (checkout_copy / ".env").write_text("PKB_DEBUG=1\nPKB_SECRET_KEY=two words\n")
    done = _manage(checkout_copy, _new_shell(tmp_path), "check")
    assert done.returncode == 1
    assert "line 2: expected NAME=value" in done.stderr and "Traceback" not in done.stderr
