"""The documented backup and restore, for real: deploy/backup on the test database, then
pg_restore into a new database and `manage.py bundles restore` onto an empty disk."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.db import connection

from tests.integration.conftest import REPO, _test_database_url
from tests.portal.bundles import solving
from tests.portal.factories import SubmissionFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _run(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def restored_database_url():
    if connection.vendor != "postgresql" or not shutil.which("pg_dump"):
        pytest.skip("needs PostgreSQL and its client tools (pg_dump, pg_restore)")
    name = f"pkb_restore_{uuid.uuid4().hex[:8]}"
    source = _test_database_url()
    admin = source.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield source.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_a_backup_restores_the_database_and_every_bundle(restored_database_url, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    data = solving("all-reduce")
    submission = SubmissionFactory(
        bundle__data=data, bundle_sha256=hashlib.sha256(data).hexdigest()
    )
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "PKB_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "PKB_BACKUP_DIR": str(tmp_path / "backups"),
        "PKB_PYTHON": sys.executable,
    }

    _run([str(REPO / "deploy" / "backup")], env)
    [dump] = (tmp_path / "backups").glob("db-*.dump")
    [tar] = (tmp_path / "backups").glob("bundles-*.tar")

    # The host is lost: a new database, an empty disk.
    _run(["pg_restore", "--no-owner", f"--dbname={restored_database_url}", str(dump)], env)
    env |= {"DATABASE_URL": restored_database_url, "PKB_MEDIA_ROOT": str(tmp_path / "new")}
    out = _run([sys.executable, "manage.py", "bundles", "restore", str(tar)], env)

    assert "1 bundles restored" in out
    with psycopg.connect(restored_database_url) as conn:
        row = conn.execute(
            "SELECT bundle, bundle_sha256 FROM submissions_submission WHERE id = %s",
            [submission.pk],
        ).fetchone()
    assert row == (submission.bundle.name, submission.bundle_sha256)
    assert (tmp_path / "new" / submission.bundle.name).read_bytes() == data
