from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.settings import envbool, envint, envstr

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw,expected",
    [("true", True), ("1", True), ("YES", True), ("false", False), ("0", False), ("no", False)],
)
def test_envbool_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("PKB_FLAG", raw)
    assert envbool("PKB_FLAG", not expected) is expected


@pytest.mark.parametrize("raw", ["ture", "on", "2", "maybe"])
def test_envbool_fails_loudly_on_anything_else(monkeypatch, raw):
    monkeypatch.setenv("PKB_FLAG", raw)
    with pytest.raises(ImproperlyConfigured, match="PKB_FLAG"):
        envbool("PKB_FLAG", False)


def test_envbool_and_envint_defaults(monkeypatch):
    monkeypatch.delenv("PKB_FLAG", raising=False)
    assert envbool("PKB_FLAG", True) is True
    assert envint("PKB_FLAG", 7) == 7


def test_envint_fails_loudly(monkeypatch):
    monkeypatch.setenv("PKB_N", "12s")
    with pytest.raises(ImproperlyConfigured, match="integer"):
        envint("PKB_N", 1)


def test_a_secret_may_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    monkeypatch.delenv("PKB_KEY", raising=False)
    monkeypatch.setenv("PKB_KEY_FILE", str(secret))
    assert envstr("PKB_KEY") == "from-a-file"
    monkeypatch.setenv("PKB_KEY", "inline")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        envstr("PKB_KEY")


def load_settings(**env: str) -> subprocess.CompletedProcess:
    """Import the settings in a fresh process, outside pytest, with only `env` set."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "PYTEST_"))}
    clean.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-c", "import portal.settings as s; print(s.SECRET_KEY, s.DEBUG)"],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_settings_without_a_secret_key_refuse_to_load():
    result = load_settings()
    assert result.returncode != 0
    assert "PKB_SECRET_KEY" in result.stderr


def test_settings_load_with_a_secret_key_or_in_debug():
    assert load_settings(PKB_SECRET_KEY="s3cret").stdout.split() == ["s3cret", "False"]
    debug = load_settings(PKB_DEBUG="yes").stdout.split()
    assert debug[0].startswith("insecure-") and debug[1] == "True"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"PKB_DEBUG": "perhaps"}, "PKB_DEBUG"),
        ({"PKB_DEBUG": "1", "PKB_SUBMISSION_PROFILE": "tpu"}, "PKB_SUBMISSION_PROFILE"),
        ({"PKB_DEBUG": "1", "PKB_STUCK_AFTER_S": "soon"}, "PKB_STUCK_AFTER_S"),
        # A live host must not look dead after one late heartbeat.
        ({"PKB_DEBUG": "1", "PKB_HEARTBEAT_S": "30"}, "at least 3 x PKB_HEARTBEAT_S"),
        ({"PKB_DEBUG": "1", "PKB_SWEEP_INTERVAL_S": "0"}, "PKB_SWEEP_INTERVAL_S"),
        ({"PKB_DEBUG": "1", "PKB_TEST_RUNS_PER_DAY": "0"}, "PKB_TEST_RUNS_PER_DAY"),
        ({"PKB_DEBUG": "1", "PKB_PROFILE_RUNS_PER_HOUR": "-1"}, "no hourly limit"),
    ],
)
def test_bad_values_fail_at_start_up(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_sqlite_tests_use_a_file_that_workers_can_share(settings):
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        assert db["TEST"]["NAME"].endswith("var/test.sqlite3")


def test_static_files_are_served_by_whitenoise_outside_debug(settings):
    assert "whitenoise.middleware.WhiteNoiseMiddleware" in settings.MIDDLEWARE
