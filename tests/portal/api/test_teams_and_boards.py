from __future__ import annotations

import pytest
from django.urls import reverse

from tests.portal.factories import (
    ProblemResultFactory,
    SubmissionFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


def test_teams_are_listed_with_their_member_counts(api, alice, bob, charlie):
    data = api.get(reverse("api:teams")).json()
    assert data["count"] == 2
    assert [(t["name"], t["member_count"]) for t in data["results"]] == [
        ("Alice's Kernels", 2),
        ("Charlie Ltd", 1),
    ]
    assert data["results"][0]["url"].endswith(reverse("api:team", args=["alices-kernels"]))
    assert data["results"][0]["html_url"].endswith(
        reverse("leaderboard:team", args=["alices-kernels"])
    )


def test_a_team_shows_its_members_but_not_its_invite_code(api, alice, bob):
    data = api.get(reverse("api:team", args=["alices-kernels"])).json()
    assert [(m["username"], m["role"]) for m in data["members"]] == [
        ("alice", "owner"),
        ("bob", "member"),
    ]
    assert "invite_code" not in data


def test_an_unknown_team_is_a_404(api, alice):
    assert api.get(reverse("api:team", args=["nobody"])).status_code == 404


def test_the_own_team_has_its_invite_code(alice_api, team):
    data = alice_api.get(reverse("api:own-team")).json()
    assert (data["slug"], data["invite_code"]) == ("alices-kernels", team.invite_code)


def test_the_own_team_requires_credentials(api):
    assert api.get(reverse("api:own-team")).status_code == 401


def test_no_team_is_a_404_that_says_what_to_do(client, dana):
    client.force_login(dana)
    response = client.get(reverse("api:own-team"))
    assert response.status_code == 404
    assert "create or join one" in response.json()["detail"]


@pytest.mark.parametrize(
    "name,args",
    [
        ("api:teams", []),
        ("api:team", ["alices-kernels"]),
        ("api:own-team", []),
        ("api:me", []),
        ("api:problem-leaderboard", ["all-reduce"]),
    ],
)
def test_the_read_endpoints_reject_writes(alice_api, problems, name, args):
    assert alice_api.post(reverse(name, args=args)).status_code == 405
    assert alice_api.delete(reverse(name, args=args)).status_code == 405


def result(team, problem, *, speedup, profile="cpu", **kwargs):
    submission = SubmissionFactory(team=team, done=True, profile=profile)
    return ProblemResultFactory(
        submission=submission, problem=problem, speedup=speedup, time_us=100 / speedup, **kwargs
    )


def test_a_problem_ranks_each_teams_best_result(api, problems):
    fast, slow = TeamFactory(name="Fast"), TeamFactory(name="Slow")
    reduce = problems["all-reduce"]
    result(slow, reduce, speedup=1.2)
    result(fast, reduce, speedup=1.1)
    result(fast, reduce, speedup=3.0, roofline=0.7)
    result(slow, reduce, speedup=9.0, flags=["below_floor"])  # flagged: never ranked
    result(slow, problems["all-gather"], speedup=5.0)  # another problem
    result(slow, reduce, speedup=8.0, profile="h200x4")  # another profile
    data = api.get(reverse("api:problem-leaderboard", args=["all-reduce"])).json()
    assert (data["problem"], data["profile"]) == ("all-reduce", "cpu")
    rows = [(r["rank"], r["team"], r["speedup"], r["roofline"]) for r in data["rows"]]
    assert rows == [(1, "Fast", 3.0, 0.7), (2, "Slow", 1.2, None)]


def test_a_problem_ranking_per_profile(api, problems):
    result(TeamFactory(name="Big Iron"), problems["all-reduce"], speedup=8.0, profile="h200x4")
    url = reverse("api:problem-leaderboard", args=["all-reduce"])
    assert [r["team"] for r in api.get(url, {"profile": "h200x4"}).json()["rows"]] == ["Big Iron"]
    assert api.get(url).json()["rows"] == []


@pytest.mark.parametrize("slug", ["secret-op", "nope"])
def test_a_problem_ranking_404s_on_unknown_or_unpublished(api, problems, slug):
    url = reverse("api:problem-leaderboard", args=[slug])
    assert api.get(url).status_code == 404


def test_a_problem_ranking_of_an_unknown_profile_is_a_400(api, problems):
    url = reverse("api:problem-leaderboard", args=["all-reduce"])
    assert api.get(url, {"profile": "abacus"}).status_code == 400


def test_the_leaderboard_takes_a_profile(api, problems):
    result(TeamFactory(name="Big Iron"), problems["all-reduce"], speedup=8.0, profile="h200x4")
    data = api.get(reverse("api:leaderboard"), {"profile": "h200x4"}).json()
    assert data["profile"] == "h200x4"
    assert [r["team"] for r in data["rows"] if not r["is_baseline"]] == ["Big Iron"]
    assert api.get(reverse("api:leaderboard"), {"profile": "abacus"}).status_code == 400


def test_the_leaderboard_says_when_its_shares_are_weighted(api, problems):
    result(TeamFactory(name="Big Iron"), problems["all-reduce"], speedup=8.0)
    assert api.get(reverse("api:leaderboard")).json()["weighted"] is False
    problems["all-reduce"].weight = 2.0
    problems["all-reduce"].save()
    data = api.get(reverse("api:leaderboard")).json()
    [row] = [r for r in data["rows"] if r["team"] == "Big Iron"]
    assert data["weighted"] is True
    assert (row["score"]["faster"], row["score"]["total"], row["score"]["fast_1"]) == (1, 3, 0.5)
