from __future__ import annotations

import pytest
from django.urls import reverse

from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = pytest.mark.django_db


def test_problems_lists_the_published_ones_in_catalog_order(client, problems):
    response = client.get(reverse("api:problems"))
    assert response.status_code == 200
    listed = response.json()["results"]
    assert [p["slug"] for p in listed] == ["all-gather", "all-reduce", "tp-linear"]
    first = listed[0]
    assert first["category"] == "collective"
    assert first["category_label"] == "Collective primitives"
    assert first["url"].endswith(reverse("api:problem", args=["all-gather"]))
    assert "reference_source" not in first


def test_a_problem_has_its_reference(client, problems):
    response = client.get(reverse("api:problem", args=["all-reduce"]))
    assert response.status_code == 200
    data = response.json()
    assert data["title"] == "All-reduce (sum)"
    assert data["reference_source"].startswith("def solution")
    assert data["world_sizes"] == [2, 4, 8]


@pytest.mark.parametrize("slug", ["secret-op", "old-op", "nope"])
def test_unpublished_and_unknown_problems_are_a_404(client, problems, slug):
    assert client.get(reverse("api:problem", args=[slug])).status_code == 404


@pytest.mark.parametrize("name", ["api:problem", "api:problem-leaderboard"])
def test_a_mistyped_problem_gets_the_closest_published_slugs(client, problems, name):
    response = client.get(reverse(name, args=["secret-opp"]))
    assert response.status_code == 404
    assert "secret-op" not in response.json()["detail"].replace("secret-opp", "")
    response = client.get(reverse(name, args=["all_reduce"]))
    assert response.json() == {
        "detail": "No published problem 'all_reduce'; did you mean all-reduce?"
    }


def test_the_leaderboard(client, problems):
    submit(TeamFactory(name="Ring Masters", slug="ring-masters"), {problems["all-reduce"]: 2.0})
    data = client.get(reverse("api:leaderboard")).json()
    assert data["profile"] == "cpu" and data["category"] is None
    assert [c["value"] for c in data["columns"]] == ["collective", "tensor"]
    baseline, team = board_rows(data)
    assert baseline["rank"] is None and baseline["team"] == "PyTorch + NCCL (reference)"
    assert team["rank"] == 1 and team["team"] == "Ring Masters"
    score = team["score"]
    assert (score["solved"], score["faster"], score["geomean"], score["total"]) == (1, 1, 2.0, 3)
    assert (score["fast_0"], score["fast_1"], score["fast_2"]) == pytest.approx((1 / 3, 1 / 3, 0))
    assert [c["solved"] for c in team["categories"]] == [1, 0]
    assert team["curve"][0][0] == 0 and all(len(corner) == 2 for corner in team["curve"])


def board_rows(data) -> tuple[dict, dict]:
    """The baseline and the one team, wherever the ranking puts them."""
    [baseline] = [r for r in data["rows"] if r["is_baseline"]]
    [team] = [r for r in data["rows"] if not r["is_baseline"]]
    return baseline, team


def test_the_leaderboard_by_category(client, problems):
    data = client.get(reverse("api:leaderboard"), {"category": "tensor"}).json()
    assert data["category"] == "tensor"
    assert [r["team"] for r in data["rows"]] == ["PyTorch + NCCL (reference)"]
    response = client.get(reverse("api:leaderboard"), {"category": "x"})
    assert response.status_code == 400
    assert response.json()["category"][0].startswith("'x' is not one of: collective,")


@pytest.fixture
def submission(alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=1.5)
    return submission


def test_a_team_member_reads_a_submission(client, bob, submission):
    client.force_login(bob)
    response = client.get(reverse("api:submission", args=[submission.pk]))
    assert response.status_code == 200
    data = response.json()
    assert (data["id"], data["status"], data["team"], data["user"]) == (
        submission.pk,
        "done",
        "Alice's Kernels",
        "alice",
    )
    assert data["results"][0]["problem"] == "all-reduce"
    assert data["results"][0]["speedup"] == 1.5


def test_a_submission_requires_login(client, submission):
    # 401 with a challenge, not 403: the API authenticates with tokens (Token first).
    response = client.get(reverse("api:submission", args=[submission.pk]))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Token realm="api"'


def test_another_team_gets_a_404(client, charlie, submission):
    client.force_login(charlie)
    assert client.get(reverse("api:submission", args=[submission.pk])).status_code == 404


def test_a_bad_submission_id_is_a_404(client, alice, submission):
    client.force_login(alice)
    assert client.get(reverse("api:submission", args=[submission.pk + 99])).status_code == 404


@pytest.mark.parametrize(
    "name,args",
    [("api:problems", []), ("api:problem", ["all-reduce"]), ("api:leaderboard", [])],
)
def test_the_read_api_rejects_writes(client, alice, problems, name, args):
    assert client.post(reverse(name, args=args)).status_code == 405
    client.force_login(alice)
    assert client.post(reverse(name, args=args)).status_code == 405


def test_a_submission_rejects_wrong_method(client, alice, submission):
    client.force_login(alice)
    assert client.delete(reverse("api:submission", args=[submission.pk])).status_code == 405


def test_a_submission_exposes_roofline_flags_and_environment(client, alice, submission, problems):
    submission.environment = {"gpu": "NVIDIA H200", "gpu_count": 4}
    submission.save()
    submission.results.update(roofline=0.62)
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-gather"],
        speedup=30.0,
        roofline=1.8,
        flags=["below_floor"],
    )
    client.force_login(alice)
    data = client.get(reverse("api:submission", args=[submission.pk])).json()
    results = {r["problem"]: r for r in data["results"]}
    assert (results["all-reduce"]["roofline"], results["all-reduce"]["flags"]) == (0.62, [])
    assert results["all-reduce"]["flagged"] is False
    assert (results["all-gather"]["flags"], results["all-gather"]["flagged"]) == (
        ["below_floor"],
        True,
    )
    assert data["environment"] == {"gpu": "NVIDIA H200", "gpu_count": 4}


def test_the_leaderboard_rows_carry_the_roofline(client, submission):
    submission.results.update(roofline=0.5)
    baseline, team = board_rows(client.get(reverse("api:leaderboard")).json())
    assert baseline["roofline"] is None
    assert team["roofline"] == 0.5
