"""The public pages make a constant number of queries whatever the number of teams and
submissions: each count is measured at 3 teams and at 30, cold and memoised."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.leaderboard import freshness, kept
from tests.portal.factories import MembershipFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import flagged, submit

pytestmark = pytest.mark.django_db


def populate(problems, teams: int) -> list:
    made = []
    for i in range(teams):
        team = TeamFactory()
        MembershipFactory(team=team)
        MembershipFactory(team=team)
        submit(
            team,
            {problems["all-reduce"]: 1.0 + i, problems["tp-linear"]: "wrong_answer"},
            minutes=i,
        )
        submit(team, {problems["all-gather"]: 0.5, problems["all-reduce"]: 0.9}, minutes=i + 1)
        submit(team, {problems["tp-linear"]: 1.2}, minutes=i + 2, profile="h200x4")
        flagged(team, problems["tp-linear"], speedup=30.0, minutes=i + 3)
        made.append(team)
    return made


def count_queries(client, url: str, *, cold: bool) -> int:
    kept.refresh()  # the marked teams' rows are counted by the refresh's own test below
    if cold:
        freshness.forget()
    else:
        client.get(url)  # builds and memoises the board
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return len(context.captured_queries)


@pytest.fixture
def counts(client, problems):
    """{pages: (queries at 3 teams, queries at 30 teams)} for one URL-making function."""

    def measure(url_of, *, cold: bool = True) -> tuple[int, int]:
        found = []
        teams = []
        for size in (3, 30):
            teams += populate(problems, size - len(teams))
            found.append(count_queries(client, url_of(teams[0]), cold=cold))
        return tuple(found)

    return measure


@pytest.mark.parametrize("query", ["", "?category=tensor", "?profile=h200x4", "?page=2"])
def test_the_leaderboard_page_makes_constant_queries(counts, query):
    cold = counts(lambda team: reverse("leaderboard:home") + query)
    # data version, marks, problems, kept rows, the model entries (none: their attempts are
    # not asked for; tests/portal/entries counts them)
    assert cold[0] == cold[1] == 5


def test_refreshing_marked_teams_makes_constant_queries(problems):
    found = []
    for size in (3, 30):
        populate(problems, size)
        with CaptureQueriesContext(connection) as context:
            kept.refresh()
        found.append(len(context.captured_queries))
    # marks, (savepoint,) take the marks, delete the rows, problems, per profile its counted
    # results and their runs, insert the rows (one batch each 500)
    assert found[0] == found[1]


def test_a_memoised_leaderboard_page_makes_one_query(counts):
    assert counts(lambda team: reverse("leaderboard:home"), cold=False) == (1, 1)


def test_the_problem_page_makes_constant_queries(counts):
    found = counts(lambda team: reverse("problems:detail", args=["all-reduce"]))
    # the problem, its ranking, its reference times, the model entries (none here)
    assert found[0] == found[1] == 4


def test_the_team_page_makes_constant_queries(counts):
    found = counts(lambda team: reverse("leaderboard:team", args=[team.slug]))
    # team, history, problems, results, members, the board (version + 4 when cold)
    assert found[0] == found[1] == 10
