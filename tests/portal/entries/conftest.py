"""Entries for the tests: alice's team evaluates "Claude Kernels" (a model, n=3, k=2)."""

from __future__ import annotations

import datetime

import pytest

from portal.entries.services import entry_register
from tests.portal.api.conftest import (  # noqa: F401  (the API's fixtures)
    _fresh_throttle_counters,
    alice_api,
    api,
    charlie_api,
)


@pytest.fixture(autouse=True)
def _room_for_batches(settings):
    # Each sample takes one of the team's runs at once (tests/portal/entries/
    # test_team_budget.py); these tests send batches of n=3 to score them.
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 10


@pytest.fixture
def entry(alice, problems):
    return entry_register(
        user=alice,
        name="Claude Kernels",
        kind="model",
        model_name="claude",
        model_version="4.5",
        harness="one-shot prompt",
        sampling="temperature=1.0",
        samples_per_problem=3,
        k=2,
        evaluated_on=datetime.date(2026, 11, 20),
    )
