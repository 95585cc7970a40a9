"""The entries' pages: the checklist (works, login where needed, bad ids, wrong methods)."""

from __future__ import annotations

import pytest

from portal.entries.models import Entry
from portal.leaderboard import freshness
from tests.portal.entries.helpers import three_samples

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_boards():
    freshness.forget()


def test_the_list_shows_each_entry_with_its_scores(client, alice, entry):
    three_samples(alice, entry)
    page = client.get("/entries/?kind=model").content.decode()
    assert 'data-entry="claude-kernels"' in page and "pass@k" in page
    assert 'data-entry="claude-kernels"' not in client.get("/entries/?kind=agent").content.decode()
    assert client.get("/entries/?kind=robot").status_code == 404


def test_registering_needs_a_login_and_a_team(client, alice, dana, problems):
    assert client.get("/entries/new/").status_code == 302
    client.force_login(dana)
    assert "Create or join a team first" in client.get("/entries/new/").content.decode()


def test_a_member_registers_through_the_form(client, alice, problems):
    client.force_login(alice)
    response = client.post(
        "/entries/new/",
        {"name": "Agent K", "kind": "agent", "model_name": "m", "samples_per_problem": 2, "k": 3},
    )
    assert response.status_code == 400 and "pass@k is estimated" in response.content.decode()
    response = client.post(
        "/entries/new/",
        {"name": "Agent K", "kind": "agent", "model_name": "m", "samples_per_problem": 2, "k": 2},
    )
    assert response.status_code == 302 and response["Location"] == "/entries/agent-k/"
    assert Entry.objects.get().team.slug == "alices-kernels"


def test_the_entry_and_sample_pages_are_public(client, alice, entry):
    three_samples(alice, entry)
    page = client.get("/entries/claude-kernels/").content.decode()
    assert "n = 3 samples per problem, k = 2" in page and 'data-sample="3"' in page
    sample = client.get("/entries/claude-kernels/samples/1/").content.decode()
    assert 'id="reproduce"' in sample and "CPU, 4 ranks over gloo" in sample


@pytest.mark.parametrize(
    "url",
    [
        "/entries/nope/",
        "/entries/claude-kernels/samples/9/",
        "/entries/claude-kernels/dataset.xlsx",
        "/leaderboard/dataset.json",
        "/?who=robots",
        "/leaderboard/dataset.csv?who=robots",
    ],
)
def test_bad_ids_and_choices_are_404s(client, entry, url):
    assert client.get(url).status_code == 404


def test_the_pages_refuse_a_post(client, alice, entry):
    client.force_login(alice)
    assert client.post("/entries/claude-kernels/").status_code == 405
    assert client.post("/entries/claude-kernels/dataset.csv").status_code == 405


def test_the_board_page_links_its_dataset_and_filters(client, alice, entry):
    three_samples(alice, entry)
    page = client.get("/?who=models&category=collective").content.decode()
    assert 'href="/leaderboard/dataset.csv?category=collective&amp;who=models"' in page
    assert 'data-entry="claude-kernels"' in page
    assert 'data-entry="claude-kernels"' not in client.get("/?who=people").content.decode()
    csv = client.get("/leaderboard/dataset.csv?category=collective&who=models")
    assert csv["Content-Disposition"].endswith('pkb-board-cpu-collective-models.csv"')
    assert csv.content.decode().count("\n") == 4  # the header and three attempts
