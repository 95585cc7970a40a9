"""Production settings read from the environment, failing at start-up on bad values."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.portal.test_settings import REPO, load_settings


@pytest.mark.parametrize(
    "env,message",
    [
        ({"PKB_HSTS_SECONDS": "-1"}, "PKB_HSTS_SECONDS"),
        ({"PKB_HSTS_SECONDS": "a year"}, "PKB_HSTS_SECONDS"),
        ({"PKB_SSL_REDIRECT": "sometimes"}, "PKB_SSL_REDIRECT"),
        ({"PKB_RETENTION_DAYS": "-3"}, "PKB_RETENTION_DAYS"),
    ],
)
def test_bad_production_values_fail_at_start_up(env, message):
    result = load_settings(PKB_DEBUG="1", **env)
    assert result.returncode != 0
    assert message in result.stderr


def test_files_and_security_headers_come_from_the_environment(tmp_path):
    code = (
        "import portal.settings as s; print(s.STATIC_ROOT, s.MEDIA_ROOT, s.SECURE_HSTS_SECONDS,"
        " s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_SSL_REDIRECT, s.PKB_RETENTION_DAYS)"
    )
    env = {
        "PKB_SECRET_KEY": "s3cret",
        "PKB_STATIC_ROOT": str(tmp_path / "static"),
        "PKB_MEDIA_ROOT": str(tmp_path / "media"),
        "PKB_HSTS_SECONDS": "31536000",
        "PKB_HSTS_INCLUDE_SUBDOMAINS": "true",
        "PKB_SSL_REDIRECT": "yes",
        "PKB_RETENTION_DAYS": "90",
    }
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "PYTEST_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == [
        str(tmp_path / "static"),
        str(tmp_path / "media"),
        "31536000",
        "True",
        "True",
        "90",
    ]
    assert (tmp_path / "static").is_dir(), "made at start-up, as whitenoise expects"


def test_mail_goes_to_the_console_unless_smtp_is_configured(tmp_path):
    code = (
        "import portal.settings as s; print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT,"
        " s.EMAIL_HOST_USER, s.EMAIL_HOST_PASSWORD, s.EMAIL_USE_TLS, s.DEFAULT_FROM_EMAIL,"
        " s.PKB_SITE_URL)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "PYTEST_"))}

    def read(**env: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=clean | {"PKB_SECRET_KEY": "s3cret", **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.split()

    assert read()[0] == "django.core.mail.backends.console.EmailBackend"
    (tmp_path / "mail-password").write_text("hunter2\n")
    assert read(
        PKB_EMAIL_BACKEND="smtp",
        PKB_EMAIL_HOST="mail.example.org",
        PKB_EMAIL_PORT="465",
        PKB_EMAIL_USER="pkb",
        PKB_EMAIL_PASSWORD_FILE=str(tmp_path / "mail-password"),
        PKB_EMAIL_STARTTLS="false",
        PKB_EMAIL_FROM="kernels@example.org",
        PKB_SITE_URL="https://kernels.example.org/",
    ) == [
        "django.core.mail.backends.smtp.EmailBackend",
        "mail.example.org",
        "465",
        "pkb",
        "hunter2",
        "False",
        "kernels@example.org",
        "https://kernels.example.org",
    ]


@pytest.mark.parametrize(
    "env,message",
    [
        ({"PKB_EMAIL_BACKEND": "sendmail"}, "PKB_EMAIL_BACKEND"),
        ({"PKB_EMAIL_PORT": "smtp"}, "PKB_EMAIL_PORT"),
        ({"PKB_EMAIL_TIMEOUT_S": "0"}, "PKB_EMAIL_TIMEOUT_S"),
        ({"PKB_SITE_URL": "kernels.example.org"}, "PKB_SITE_URL"),
    ],
)
def test_bad_mail_settings_fail_at_start_up(env, message):
    result = load_settings(PKB_DEBUG="1", **env)
    assert result.returncode != 0
    assert message in result.stderr
