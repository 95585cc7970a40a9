"""With PKB_LEADERBOARD_SERVE_STALE, an outdated board is served while a thread rebuilds it.

Transactional: the rebuilding thread has its own connection and reads only committed rows.
"""

from __future__ import annotations

import threading

import pytest

from portal.leaderboard import freshness
from portal.leaderboard.selectors import leaderboard_rows
from tests.portal.factories import TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _serve_stale(settings):
    settings.PKB_LEADERBOARD_SERVE_STALE = True
    yield
    freshness.wait_for_rebuilds()  # no thread outlives its test's database


def names() -> list[str]:
    return [r.team_name for r in leaderboard_rows(profile="cpu") if not r.is_baseline]


def test_the_first_request_builds_the_board_at_once(problems):
    submit(TeamFactory(name="Ring"), {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"]


def test_it_serves_the_previous_board_until_the_rebuild_is_done(problems):
    submit(TeamFactory(name="Ring"), {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"]
    submit(TeamFactory(name="Gather"), {problems["all-gather"]: 3.0})
    assert names() == ["Ring"]  # the previous board, at once
    freshness.wait_for_rebuilds()
    assert names() == ["Gather", "Ring"]


def test_one_thread_rebuilds_a_board_however_many_requests_find_it_outdated(problems):
    assert freshness.memoised("k", lambda: "old") == "old"
    TeamFactory()  # a change: the data version moves
    release = threading.Event()
    builds = []

    def build() -> str:
        builds.append(1)
        release.wait()
        return "new"

    assert [freshness.memoised("k", build) for _ in range(3)] == ["old"] * 3
    release.set()
    freshness.wait_for_rebuilds()
    assert builds == [1]
    assert freshness.memoised("k", build) == "new"


def test_a_failed_rebuild_keeps_the_previous_board_and_is_retried(problems):
    assert freshness.memoised("k", lambda: "old") == "old"
    TeamFactory()

    def broken() -> str:
        raise RuntimeError("database went away")

    previous_hook = threading.excepthook
    threading.excepthook = lambda args: None  # the thread's traceback is expected here
    try:
        assert freshness.memoised("k", broken) == "old"
        freshness.wait_for_rebuilds()
    finally:
        threading.excepthook = previous_hook
    assert freshness.memoised("k", lambda: "new") == "old"
    freshness.wait_for_rebuilds()
    assert freshness.memoised("k", lambda: "newer") == "new"
