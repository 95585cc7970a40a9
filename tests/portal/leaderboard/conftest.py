from __future__ import annotations

import pytest

from portal.leaderboard import freshness


@pytest.fixture(autouse=True)
def _cold_boards():
    """Each test starts without memoised boards, so query counts are those of a cold page."""
    freshness.forget()
    yield
    freshness.forget()
