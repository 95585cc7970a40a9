"""`make run` on a clean clone, as a new user runs it: the site answers and workers start;
and the README's `manage.py` commands in a new shell, with the `.env` that `make run` writes.

`make test`, the other README command, is what CI runs on a clean clone (.ci/run).
"""

from __future__ import annotations

import os
import re
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


# What the README's commands need of the checkout; a copy, so the repository's own .env
# and var/ are never read, written or removed.
MANAGE_PY_NEEDS = (
    "manage.py", "portal", "evaluator", "problems", "templates", "static", "examples",
    "README.md",
)  # fmt: skip


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
    # The virtual environment `make install` makes, as the README's `.venv/bin/...` finds it.
    (copy / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return copy


def _new_shell(tmp_path: Path) -> dict[str, str]:
    """A new user's shell: no PKB_DEBUG, no secret key, not under pytest, no virtual
    environment on PATH."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
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
        assert "`make install` writes one" in done.stderr, "and where a development one comes from"
        assert "Traceback" not in done.stderr


def test_a_malformed_env_file_stops_manage_py_with_its_line(checkout_copy, tmp_path):
    (checkout_copy / ".env").write_text("PKB_DEBUG=1\nPKB_SECRET_KEY=two words\n")
    done = _manage(checkout_copy, _new_shell(tmp_path), "check")
    assert done.returncode == 1
    assert "line 2: expected NAME=value" in done.stderr and "Traceback" not in done.stderr


# How the next test runs each of the README's `.venv/bin/...` commands ("{}" is the
# command): as written; with what a person would type at its prompt; or with --help where
# it needs what a new shell lacks (a running site, a worker, minutes of CPU), which still
# fails when the module, the command or an option before --help is gone. A command added to
# the README fails the test until it is listed here.
README_COMMANDS = {
    ".venv/bin/python -m zipfile -c bundle.zip examples/pytorch/*.py": "{}",
    ".venv/bin/python manage.py createsuperuser": "{} --noinput --username admin "
    "--email admin@example.org",
    ".venv/bin/python -m evaluator check bundle.zip --world-size 4": "{} --help",
    ".venv/bin/python -m evaluator check bundle.zip --mode test": "{} --help",
    ".venv/bin/python -m evaluator check bundle.zip --mode profile --out prof/": "{} --help",
    ".venv/bin/pkb": "{} --help",
    ".venv/bin/activate": ". {} && pkb --help",  # "then plain `pkb`"
    ".venv/bin/pkb login --url http://127.0.0.1:8000": "{} --help",
    ".venv/bin/pkb problems": "{} --help",
    ".venv/bin/pkb submit bundle.zip --wait": "{} --help",
    ".venv/bin/pkb submit bundle.zip --mode test --profile h200x4": "{} --help",
    ".venv/bin/pkb profiles": "{} --help",
    ".venv/bin/pkb quota": "{} --help",
    ".venv/bin/pkb download 42 --to traces/": "{} --help",
    ".venv/bin/pkb status 42": "{} --help",
    ".venv/bin/pkb leaderboard --category collective --profile h200x4 --problem all-reduce": (
        "{} --help"
    ),
    '.venv/bin/pkb entry register "My Model" --kind model --model my-model --samples 3 --k 2': (
        "{} --help"
    ),
    ".venv/bin/pkb submit --entry my-model --samples DIR --wait --json": "{} --help",
    ".venv/bin/pkb entry status my-model --json": "{} --help",
    '.venv/bin/python manage.py submit_example examples/fast --label "Example: examples/fast"': (
        "{} --help"
    ),
    ".venv/bin/python -m portal.leaderboard.bench": "{} --help",
    ".venv/bin/python -m portal.leaderboard.bench --database-url postgres://localhost/pkb_bench": (
        "{} --help"
    ),
}
# The `manage.py` commands the README names in its text, run as written (arguments filled).
README_MANAGE_PY = {
    "createsuperuser": None,  # above
    "submit_example": None,  # above
    "sync_problems": "sync_problems",
    "rerun_top": "rerun_top --top 3",
    "rescore_intervals": "rescore_intervals --dry-run && .venv/bin/python manage.py "
    "rescore_intervals",
    "bundles": "bundles backup var/bundles.tar && .venv/bin/python manage.py bundles "
    "restore var/bundles.tar",
}
# Sections for the production hosts: commands as root under /opt/pkb (docs/deploy.md).
PRODUCTION_HOST_SECTIONS = ("### The portal host", "### A GPU host")


def _development_readme() -> str:
    sections = re.split(r"(?m)^(?=#{2,3} )", (REPO / "README.md").read_text())
    return "".join(s for s in sections if not s.startswith(PRODUCTION_HOST_SECTIONS))


def _readme_commands(text: str) -> set[str]:
    found = re.findall(r"(?<![\w/])\.venv/bin/[^`#\n]*", text)
    commands = {" ".join(c.replace("[", "").replace("]", "").split()) for c in found}
    return {c for c in commands if c != ".venv/bin/..."}  # the text's name for them all


def test_every_readme_command_works_in_a_new_shell(checkout_copy, tmp_path):
    text = _development_readme()
    commands = _readme_commands(text)
    assert ".venv/bin/python manage.py createsuperuser" in commands, "the reading works"
    assert not commands - README_COMMANDS.keys(), "say below how this test runs them"
    named = set(re.findall(r"manage\.py\s+(\w+)", text))
    assert not named - README_MANAGE_PY.keys(), "say below how this test runs them"

    env = _new_shell(tmp_path)
    env.pop("DATABASE_URL")  # the default, SQLite under var/, as `make run` has it
    # A new clone after `make install`, which writes .env and migrates nothing.
    subprocess.run([str(checkout_copy / "scripts" / "ensure-env")], check=True, env=env)
    lines = [".venv/bin/python manage.py migrate --noinput --verbosity 0"]
    lines += [".venv/bin/python manage.py " + a for a in README_MANAGE_PY.values() if a]
    lines += [how.format(command) for command, how in README_COMMANDS.items()]
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line], cwd=checkout_copy, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (checkout_copy / "bundle.zip").is_file()
