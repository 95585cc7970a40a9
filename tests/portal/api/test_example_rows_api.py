"""Examples in the API: labelled rows of the board, a list of their own on a problem."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.portal.factories import TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = pytest.mark.django_db

FAST = "Example: examples/fast"


@pytest.fixture
def shown(problems):
    """Ring Masters at 1.5x on all-reduce; the fast example at 3.0x on it."""
    submit(TeamFactory(name="Ring Masters", slug="ring-masters"), {problems["all-reduce"]: 1.5})
    examples = TeamFactory(name="Examples", slug="examples")
    return submit(examples, {problems["all-reduce"]: 3.0}, example_label=FAST)


def test_the_board_marks_the_example_row_like_the_baseline(client, shown):
    rows = client.get(reverse("api:leaderboard")).json()["rows"]
    assert [(r["rank"], r["team"], r["is_baseline"], r["is_example"]) for r in rows] == [
        (None, FAST, False, True),
        (1, "Ring Masters", False, False),
        (None, "PyTorch + NCCL (reference)", True, False),
    ]
    assert [r["label"] for r in rows] == [FAST, None, None]
    assert rows[0]["team_slug"] == "" and rows[0]["score"]["faster"] == 1


def test_the_problem_ranking_lists_examples_apart_with_their_source(client, shown):
    data = client.get(reverse("api:problem-leaderboard", args=["all-reduce"])).json()
    assert [(r["rank"], r["team"]) for r in data["rows"]] == [(1, "Ring Masters")]
    [example] = data["examples"]
    assert example["is_example"] and example["label"] == FAST and example["speedup"] == 3.0
    source = reverse("submissions:bundle", args=[shown.pk])
    assert example["source_url"] == f"http://testserver{source}"
    assert client.get(source).status_code == 200  # examples are public code


def test_a_problem_without_examples_has_an_empty_list(client, problems):
    data = client.get(reverse("api:problem-leaderboard", args=["tp-linear"])).json()
    assert data["rows"] == [] and data["examples"] == []


def test_the_schema_documents_the_example_fields(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert {"is_example", "label"} <= set(components["Row"]["properties"])
    ranking = components["ProblemRanking"]["properties"]
    assert ranking["examples"]["items"]["$ref"].endswith("ProblemExampleRow")
    assert "source_url" in components["ProblemExampleRow"]["properties"]
