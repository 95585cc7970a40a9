"""A recorded result shows on the next view of every board it touches: each process's
watcher rebuilds the boards it served when their data change, and a request never gets a
board older than the data (PKB_LEADERBOARD_REBUILD_ON_CHANGE).

Transactional: the watcher has its own connections and hears only committed changes.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from portal.leaderboard import freshness
from portal.leaderboard.selectors import leaderboard, leaderboard_rows
from portal.leaderboard.selectors.board import board_key
from tests.portal.factories import SubmissionFactory, TeamFactory, UserFactory
from tests.portal.judging import finish, passed
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = [pytest.mark.django_db(transaction=True)]

OVERALL, COLLECTIVE = board_key("cpu"), board_key("cpu", "collective")
BOTH = (OVERALL, COLLECTIVE)


@pytest.fixture(autouse=True)
def _watching(settings):
    settings.PKB_LEADERBOARD_REBUILD_ON_CHANGE = True
    yield
    freshness.stop_watcher()  # no thread outlives its test's database


def names(category: str | None = None) -> list[str]:
    rows = leaderboard_rows(profile="cpu", category=category)
    return [r.team_name for r in rows if not r.is_baseline]


def record(team_name: str, slug: str, speedup: float) -> None:
    """A result as the portal records it: the host's finished message, through the service."""
    team = TeamFactory(name=team_name)
    submission = SubmissionFactory(
        team=team, user=UserFactory(), running=True, problems=[slug], profile="cpu"
    )
    assert finish(submission.evaluation_id, passed(slug, speedup, speedup - 0.1, speedup + 0.1))


def settled(*keys: tuple) -> None:
    """Wait until the watcher has rebuilt what it heard of, so that nothing builds a board
    while the next write is uncommitted (the case of the test on commits below)."""
    assert all(freshness.wait_until_fresh(key, timeout_s=10) for key in keys or BOTH)


def test_a_recorded_result_shows_on_the_next_view_of_every_board_it_touches(problems):
    submit(TeamFactory(name="Ring"), {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"] and names("collective") == ["Ring"]
    settled()
    record("Gather", "all-gather", 3.0)
    assert names() == ["Gather", "Ring"]  # at once, no wait
    assert names("collective") == ["Gather", "Ring"]


def test_the_watcher_rebuilds_the_boards_before_anyone_looks(problems):
    submit(TeamFactory(name="Ring"), {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"] and names("collective") == ["Ring"]
    settled()
    heard = freshness.changes_heard()
    record("Gather", "all-gather", 3.0)
    wait_for(lambda: freshness.changes_heard() > heard)
    settled()
    board = leaderboard(profile="cpu")
    assert [r.team_name for r in board.rows if not r.is_baseline] == ["Gather", "Ring"]
    assert leaderboard(profile="cpu") is board  # the watcher's build, served as it is


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite's version commits with the change"
)
def test_a_board_built_between_a_write_and_its_commit_is_rebuilt_at_the_commit(problems):
    """PostgreSQL's sequence moves when the statement runs: a board built before the commit
    carries the new version without the change. The notification at the commit mends it."""
    submit(TeamFactory(name="Ring"), {problems["all-reduce"]: 2.0})
    assert names() == ["Ring"]
    settled(OVERALL)
    written, commit = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                record("Gather", "all-gather", 3.0)
                written.set()
                commit.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert written.wait(10)
    assert names() == ["Ring"]  # built now, under the version the uncommitted write moved
    heard = freshness.changes_heard()
    commit.set()
    thread.join()
    wait_for(lambda: freshness.changes_heard() > heard)  # the commit's notification
    assert freshness.wait_until_fresh(OVERALL)
    assert names() == ["Gather", "Ring"]


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_requests_that_find_a_board_out_of_date_share_one_build(problems, settings):
    # Requests alone: a watcher hearing the change would rebuild "k" itself (with the
    # build that made "old") before the requests look, and none of them would build.
    settings.PKB_LEADERBOARD_REBUILD_ON_CHANGE = False
    freshness.stop_watcher()
    assert freshness.memoised("k", lambda: "old") == "old"
    TeamFactory()  # a change: the data version moves
    release, builds, seen = threading.Event(), [], []

    def build() -> str:
        builds.append(1)
        release.wait(10)
        return "new"

    def request() -> None:
        try:
            seen.append(freshness.memoised("k", build))
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_for(lambda: builds)
    release.set()
    for thread in threads:
        thread.join()
    assert builds == [1] and seen == ["new"] * 3


def test_a_failed_build_fails_its_request_and_the_next_one_builds_again(problems):
    assert freshness.memoised("k", lambda: "old") == "old"
    TeamFactory()

    def broken() -> str:
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError):
        freshness.memoised("k", broken)
    assert freshness.memoised("k", lambda: "new") == "new"  # never the outdated "old"
