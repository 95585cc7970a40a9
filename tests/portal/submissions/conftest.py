"""The liveness keys in the suite's own Redis database (a real Redis: the boundary the
sweeper and the hosts share)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from portal.submissions import broker


def _forget(client: redis.Redis) -> None:
    keys = list(client.scan_iter("pkb:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def liveness_keys() -> Iterator[redis.Redis]:
    """The broker's Redis, without liveness keys of an earlier test."""
    client = broker.client()
    _forget(client)
    yield client
    _forget(client)
