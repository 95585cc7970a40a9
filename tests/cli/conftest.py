"""The CLI against a real server: pytest-django's live_server, on the test database.

The portal's people and problems come from tests/portal/conftest.py; `sent` keeps bundles
from reaching a broker (the evaluation is driven by the tests through the portal's services).
"""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from portal.api.services import api_token_create
from tests.portal.conftest import (  # noqa: F401  (fixtures)
    _fast_and_isolated,
    alice,
    bob,
    charlie,
    charlie_team,
    problems,
    sent,
    team,
)


@pytest.fixture(autouse=True)
def _cli_environment(monkeypatch, tmp_path):
    """A config file of the test's own, and no PKB_URL/PKB_TOKEN from the outside."""
    monkeypatch.setenv("PKB_CONFIG", str(tmp_path / "pkb" / "config.json"))
    monkeypatch.delenv("PKB_URL", raising=False)
    monkeypatch.delenv("PKB_TOKEN", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich's tables: wide enough not to cut a cell


@pytest.fixture(autouse=True)
def _fresh_throttle_counters():
    r = redis.Redis.from_url(settings.CACHES["throttle"]["LOCATION"])
    keys = list(r.scan_iter(f"{settings.CACHES['throttle']['KEY_PREFIX']}:*"))
    if keys:
        r.delete(*keys)


@pytest.fixture
def site(live_server, monkeypatch) -> str:
    """The live server's address, as PKB_URL."""
    monkeypatch.setenv("PKB_URL", live_server.url)
    return live_server.url


@pytest.fixture
def alice_token(alice) -> str:  # noqa: F811
    return api_token_create(user=alice, name="laptop")[1]


@pytest.fixture
def as_alice(site, alice_token, monkeypatch) -> str:
    monkeypatch.setenv("PKB_TOKEN", alice_token)
    return alice_token
