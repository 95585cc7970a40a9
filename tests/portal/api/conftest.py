"""API fixtures: tokens for the named people, and a fresh throttle budget per test."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings
from rest_framework.test import APIClient

from portal.api.services import api_token_create
from tests.portal.bundles import solving, upload


@pytest.fixture(autouse=True)
def _fresh_throttle_counters():
    # The counters live in the suite's Redis database and outlive a test's transaction.
    r = redis.Redis.from_url(settings.CACHES["throttle"]["LOCATION"])
    prefix = settings.CACHES["throttle"]["KEY_PREFIX"]
    keys = list(r.scan_iter(f"{prefix}:*"))
    if keys:
        r.delete(*keys)
    yield


@pytest.fixture
def api():
    return APIClient()


def token_client(user, name: str = "laptop") -> APIClient:
    _, secret = api_token_create(user=user, name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture
def alice_api(alice):
    return token_client(alice)


@pytest.fixture
def charlie_api(charlie):
    return token_client(charlie)


@pytest.fixture
def submission_bundle(problems):
    return upload(solving("all-reduce", "all-gather"))
