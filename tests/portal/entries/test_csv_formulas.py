"""Every CSV the site writes is safe to open in a spreadsheet: a text cell that starts with
=, +, -, @, tab or carriage return carries a leading quote (OWASP's rule), one test per
export. The profile run's summary.csv: tests/evaluator/test_traces.py."""

from __future__ import annotations

import csv
import io

import pytest

from evaluator.contract import spreadsheet_safe
from portal.entries.services import entry_register
from portal.leaderboard import freshness
from tests.portal.entries.helpers import three_samples
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

HOSTILE = {
    "name": '=HYPERLINK("http://evil.example","click")',
    "model_name": "=1+2",
    "model_version": "+1",
    "harness": "@SUM(A1)",
    "sampling": "-2+3",
}


@pytest.fixture
def hostile(alice, problems):
    freshness.forget()
    entry = entry_register(user=alice, kind="model", samples_per_problem=3, k=2, **HOSTILE)
    three_samples(alice, entry)
    return entry


def _attempts(response) -> list[dict]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = csv.DictReader(io.StringIO(response.content.decode()))
    return [row for row in rows if row["row_kind"] == "attempt"]


def _assert_neutralised(rows: list[dict]) -> None:
    assert rows
    for row in rows:
        assert row["entry_name"] == "'" + HOSTILE["name"]
        assert row["model_name"] == "'=1+2" and row["model_version"] == "'+1"
        assert row["harness"] == "'@SUM(A1)" and row["sampling"] == "'-2+3"
        # Numbers stay numbers: only text is the teams' own.
        assert row["speedup"] in ("1.5", "1.02", "")


def test_the_anonymous_board_csv_page_neutralises_formulas(client, hostile):
    _assert_neutralised(_attempts(client.get("/leaderboard/dataset.csv?who=models")))


def test_the_entry_csv_page_neutralises_formulas(client, hostile):
    _assert_neutralised(_attempts(client.get(f"/entries/{hostile.slug}/dataset.csv")))


def test_the_board_csv_of_the_api_neutralises_formulas(api, hostile):
    _assert_neutralised(_attempts(api.get("/api/leaderboard/dataset/csv/?who=models")))


def test_the_entry_csv_of_the_api_neutralises_formulas(api, hostile):
    _assert_neutralised(_attempts(api.get(f"/api/entries/{hostile.slug}/dataset/csv/")))


def test_a_teams_name_on_counted_rows_is_neutralised_too(client, team, alice, problems):
    team.name = "-cmd|' /C calc'!A0"
    team.save()
    freshness.forget()
    done = SubmissionFactory(team=team, user=alice, done=True)
    ProblemResultFactory(submission=done, problem=problems["all-reduce"], speedup=1.2)
    rows = csv.DictReader(io.StringIO(client.get("/leaderboard/dataset.csv").content.decode()))
    counted = [row for row in rows if row["row_kind"] == "counted"]
    assert counted and {row["entry_name"] for row in counted} == {"'" + team.name}


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_each_formula_start_is_quoted_and_other_text_is_not(start):
    assert spreadsheet_safe(start + "x") == "'" + start + "x"
    assert spreadsheet_safe("x" + start) == "x" + start
    assert spreadsheet_safe("") == ""
