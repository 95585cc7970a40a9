"""The files a site owner copies (deploy/, compose.yaml) say what the settings accept."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

from evaluator.host.settings import load_settings

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"


def _env_file(path: Path) -> dict[str, str]:
    """As systemd's EnvironmentFile reads it: NAME=value lines, # comments."""
    env = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    return env


def test_the_portal_env_example_passes_djangos_deploy_checks(tmp_path):
    env = _env_file(DEPLOY / "portal.env.example")
    (tmp_path / "secret_key").write_text(secrets.token_urlsafe(50))
    (tmp_path / "metrics_token").write_text("scrape-token")
    (tmp_path / "smtp_password").write_text("smtp-secret")
    env |= {
        "PKB_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "PKB_METRICS_TOKEN_FILE": str(tmp_path / "metrics_token"),
        "PKB_EMAIL_PASSWORD_FILE": str(tmp_path / "smtp_password"),
        "PKB_STATIC_ROOT": str(tmp_path / "static"),
        "PKB_MEDIA_ROOT": str(tmp_path / "media"),
    }
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process; a host never does.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PKB_", "DJANGO_"))}
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO,
        env=base | env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The one warning left is deliberate: HSTS preload is a commitment for the whole domain.
    output = done.stdout + done.stderr
    assert "identified 1 issue" in output and "security.W021" in output, output


def test_the_worker_env_examples_give_a_pinned_gpu_worker(tmp_path):
    env = _env_file(DEPLOY / "worker.env.example") | _env_file(
        DEPLOY / "workers.example" / "h200x4-0.env"
    )
    (tmp_path / "seed").write_text(secrets.token_hex(32))
    (tmp_path / "cases.json").write_text("{}")
    env |= {
        "PKB_SEED_SECRET_FILE": str(tmp_path / "seed"),
        "PKB_EVAL_CASES_FILE": str(tmp_path / "cases.json"),
    }
    env.pop("PKB_CANDIDATE_USER")  # made on the GPU host (README), not here
    assert "DATABASE_URL" not in env, "a GPU host holds no database credentials"
    settings = load_settings(env)
    assert (settings.profile, settings.worker_name) == ("h200x4", "h200x4-0")
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert not settings.seed_secret_generated


def test_compose_brings_up_the_portal_host():
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    assert {"db", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    redis_command = services["redis"]["command"]
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"
    assert "--queues" in services["worker"]["command"]
    assert services["beat"]["command"][:4] == ["celery", "--app", "portal", "beat"]
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )


def test_the_systemd_units_stop_workers_gracefully():
    worker = (DEPLOY / "systemd" / "pkb-worker@.service").read_text()
    # SIGTERM to the main process only (warm shutdown), and time for an evaluation to end.
    assert "KillMode=mixed" in worker and "TimeoutStopSec=3700" in worker
    assert "EnvironmentFile=/etc/pkb/workers/%i.env" in worker
    web = (DEPLOY / "systemd" / "pkb-web.service").read_text()
    assert "--config deploy/gunicorn.conf.py" in web
    for unit in ("pkb-web", "pkb-portal-worker", "pkb-beat"):
        text = (DEPLOY / "systemd" / f"{unit}.service").read_text()
        assert "EnvironmentFile=/etc/pkb/portal.env" in text and "User=pkb" in text
