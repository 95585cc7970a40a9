"""Every API list comes in pages of a bounded size (issue 51): an anonymous GET of
/api/entries/ carried every entry with its note, 3.1 MB once one note was 3,000,000
characters. A page holds DEFAULT_LIMIT items unless `?limit=` asks for fewer or more, and
never more than MAX_LIMIT; a larger limit is a 400 that says the bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from portal.api.params import Pagination
from portal.entries.services import entry_register
from tests.portal.factories import ProblemFactory, ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[3]
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# Lists whose length the code fixes (the hardware profiles it knows), not the users.
FIXED_LISTS = {"/api/profiles/"}


def _register(user, count: int) -> None:
    for i in range(count):
        entry_register(user=user, name=f"Model {i}", kind="model", model_name="m",
                       samples_per_problem=1, k=1)  # fmt: skip


def test_the_bounds_are_the_documented_ones():
    assert (Pagination.default_limit, Pagination.max_limit) == (DEFAULT_LIMIT, MAX_LIMIT)


@pytest.mark.parametrize("doc", ["README.md", "docs/security.md"])
def test_the_docs_state_the_bounds(doc):
    text = " ".join((REPO / doc).read_text().split())
    assert f"{DEFAULT_LIMIT} items" in text and f"at most {MAX_LIMIT}" in text


def test_the_entries_list_comes_in_pages(api, alice, problems, settings):
    settings.PKB_MAX_ENTRIES_PER_TEAM = 3
    _register(alice, 3)
    first = api.get(reverse("api:entries"), {"limit": "2"}).json()
    assert first["count"] == 3 and len(first["results"]) == 2 and first["next"]
    rest = api.get(reverse("api:entries"), {"limit": "2", "offset": "2"}).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    names = [item["entry"]["name"] for item in first["results"] + rest["results"]]
    assert sorted(names) == ["Model 0", "Model 1", "Model 2"]


def test_a_page_without_a_limit_holds_the_default_number(api, problems):
    ProblemFactory.create_batch(DEFAULT_LIMIT + 1)
    data = api.get(reverse("api:problems")).json()
    assert data["count"] == DEFAULT_LIMIT + 4  # and the three published ones of `problems`
    assert len(data["results"]) == DEFAULT_LIMIT and data["next"]


@pytest.mark.parametrize("name", ["api:problems", "api:entries", "api:teams", "api:submissions"])
def test_a_limit_above_the_bound_is_a_400_that_says_it(alice_api, problems, name):
    response = alice_api.get(reverse(name), {"limit": str(MAX_LIMIT + 1)})
    assert response.status_code == 400
    refusal = f"at most {MAX_LIMIT} items a page; asked {MAX_LIMIT + 1}."
    assert response.json() == {"limit": [refusal]}
    assert alice_api.get(reverse(name), {"limit": str(MAX_LIMIT)}).status_code == 200


def test_every_list_the_schema_documents_is_paginated(api):
    """Every GET whose answer is a list answers a page (count, next, previous, results) and
    takes limit and offset, bounded as above: a new list endpoint cannot forget it."""
    schema = api.get("/api/schema/?format=json").json()
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        content = (get or {}).get("responses", {}).get("200", {}).get("content", {})
        body = content.get("application/json", {}).get("schema", {})
        if path in FIXED_LISTS:
            assert body.get("type") == "array", path
            continue
        assert body.get("type") != "array", f"{path} answers an unpaginated list"
        if "$ref" in body and body["$ref"].split("/")[-1].startswith("Paginated"):
            limit = next(p for p in get["parameters"] if p["name"] == "limit")
            assert limit["schema"]["maximum"] == MAX_LIMIT, path


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("api:leaderboard", {}), ("api:problem-leaderboard", {"slug": "all-reduce"})],
)
def test_a_boards_rows_come_in_pages(api, problems, team, charlie_team, name, kwargs):
    """A board holds a row per team with a counted result: bounded as every list is."""
    for who, speedup in ((team, 2.0), (charlie_team, 1.5)):
        submission = SubmissionFactory(team=who, done=True, problems=["all-reduce"])
        ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=speedup)
    url = reverse(name, kwargs=kwargs)
    whole = api.get(url).json()
    teams = [r["team"] for r in whole["rows"]]
    assert whole["limit"] == DEFAULT_LIMIT and whole["count"] == len(teams) >= 2
    assert {"Alice's Kernels", "Charlie Ltd"} <= set(teams)
    first = api.get(url, {"limit": "1"}).json()
    assert (first["count"], first["limit"], first["offset"]) == (len(teams), 1, 0)
    second = api.get(url, {"limit": "1", "offset": "1"}).json()
    assert [r["team"] for r in first["rows"] + second["rows"]] == teams[:2]
    refused = api.get(url, {"limit": str(MAX_LIMIT + 1)})
    assert refused.status_code == 400 and f"at most {MAX_LIMIT}" in refused.content.decode()
