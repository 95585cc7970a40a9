from __future__ import annotations

import pytest
from django.urls import reverse

from portal.leaderboard.selectors import problem_ranking
from tests.portal.factories import ProblemResultFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import flagged, submit

pytestmark = pytest.mark.django_db


def test_it_ranks_each_teams_best_result_fastest_first(problems):
    fast, slow, late = (TeamFactory(name=n) for n in ("Fast", "Slow", "Late"))
    submit(slow, {problems["all-reduce"]: 0.7}, minutes=1)
    submit(fast, {problems["all-reduce"]: 1.1}, minutes=1)
    submit(fast, {problems["all-reduce"]: 2.5}, minutes=2)
    submit(fast, {problems["all-reduce"]: "wrong_answer"}, minutes=3)
    submit(late, {problems["all-reduce"]: 2.5}, minutes=5)
    ranking = problem_ranking(problem=problems["all-reduce"], profile="cpu")
    assert [(r.rank, r.team_name, r.speedup) for r in ranking] == [
        (1, "Fast", 2.5),
        (2, "Late", 2.5),
        (3, "Slow", 0.7),
    ]


def test_other_problems_profiles_and_flagged_results_stay_out(problems):
    team = TeamFactory(name="A")
    submit(team, {problems["all-gather"]: 3.0})
    submit(team, {problems["all-reduce"]: 9.0}, profile="h200x4")
    flagged(team, problems["all-reduce"], speedup=50.0)
    assert problem_ranking(problem=problems["all-reduce"], profile="cpu") == []
    [row] = problem_ranking(problem=problems["all-reduce"], profile="h200x4")
    assert row.speedup == 9.0


def test_the_problem_page_shows_the_ranking_under_the_description(client, problems):
    team = TeamFactory(name="Ring Masters", slug="ring-masters")
    submission = submit(team, {})
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        speedup=1.8,
        time_us=42.0,
        roofline=0.31,
    )
    submit(TeamFactory(name="Slowpokes"), {problems["all-reduce"]: 0.5})
    html = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    section = html[html.index('id="problem-ranking"') :]
    assert html.index("Every rank holds a vector") < html.index('id="problem-ranking"')
    assert "Ring Masters" in section and "42.0 µs" in section and "1.80×" in section
    assert "31% of link limit" in section
    # The reference sits between the team faster than it and the one slower.
    assert section.index("Ring Masters") < section.index("baseline") < section.index("Slowpokes")
    assert 'href="/teams/ring-masters/?profile=cpu"' in section


def test_the_problem_page_switches_profiles(client, problems):
    submit(TeamFactory(name="Hopper Heroes"), {problems["all-reduce"]: 3.0}, profile="h200x4")
    url = reverse("problems:detail", args=["all-reduce"])
    assert "Hopper Heroes" not in client.get(url).content.decode()
    html = client.get(url, {"profile": "h200x4"}).content.decode()
    assert "Hopper Heroes" in html and "Ranking on 4x H200 (NVLink)" in html
    assert client.get(url, {"profile": "tpu"}).status_code == 404


def test_an_unsolved_problem_says_so(client, problems):
    html = client.get(reverse("problems:detail", args=["tp-linear"])).content.decode()
    assert "No team has solved this problem" in html
