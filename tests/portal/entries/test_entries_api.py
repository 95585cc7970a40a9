"""The entries' API: register, batches, refusals, status, boards' `who`, and the dataset."""

from __future__ import annotations

import csv
import io
from datetime import UTC, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.utils import timezone

from portal.entries import export
from portal.leaderboard import freshness
from portal.submissions.models import Submission
from tests.portal.api.conftest import token_client
from tests.portal.bundles import solving, upload
from tests.portal.entries.helpers import three_samples, wrong
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import finish, judged, passed

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _fresh_boards():
    freshness.forget()


def samples(*bundles: bytes) -> dict:
    return {"samples": [upload(b, f"sample_{i}.zip") for i, b in enumerate(bundles, 1)]}


# registering


def test_a_team_registers_an_entry_through_the_api(alice_api, problems):
    response = alice_api.post(
        "/api/entries/",
        {"name": "Agent Smith", "kind": "agent", "model_name": "m", "samples_per_problem": 5,
         "k": 5, "harness": "swe-loop", "sampling": "t=0.7"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["slug"] == "agent-smith" and body["team"] == "alices-kernels"
    assert body["html_url"].endswith("/entries/agent-smith/")


def test_registering_needs_credentials(api, problems):
    response = api.post("/api/entries/", {"name": "x"}, format="json")
    assert response.status_code == 401


def test_a_bad_declaration_is_a_400_that_says_why(alice_api, problems):
    response = alice_api.post(
        "/api/entries/",
        {"name": "X", "kind": "model", "model_name": "m", "samples_per_problem": 2, "k": 3},
        format="json",
    )
    assert response.status_code == 400
    assert "pass@k is estimated from n >= k samples" in str(response.json())


# batches


def test_a_batch_is_accepted_whole_and_followed(alice_api, entry):
    response = alice_api.post(
        f"/api/entries/{entry.slug}/samples/",
        samples(solving("all-reduce"), solving("all-reduce", "all-gather")),
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    batch = response.json()
    assert [s["number"] for s in batch["samples"]] == [1, 2]
    assert [s["status"] for s in batch["samples"]] == ["queued", "queued"]
    assert batch["finished"] is False and batch["counts"]["queued"] == 2
    assert response["Location"] == batch["url"]
    followed = alice_api.get(batch["url"]).json()
    assert followed["batch"] == batch["batch"] and len(followed["samples"]) == 2


def test_samples_beyond_n_are_a_400_with_the_reason(alice_api, entry):
    url = f"/api/entries/{entry.slug}/samples/"
    alice_api.post(url, samples(*[solving("all-reduce")] * 3), format="multipart")
    response = alice_api.post(url, samples(solving("all-reduce")), format="multipart")
    assert response.status_code == 400
    (reason,) = response.json()["samples"]
    assert "declared 3 samples per problem" in reason and "all-reduce (3 sent, 1 more)" in reason


def test_another_teams_member_gets_a_403(charlie_api, entry):
    response = charlie_api.post(
        f"/api/entries/{entry.slug}/samples/", samples(solving("all-reduce")), format="multipart"
    )
    assert response.status_code == 403
    assert "belongs to another team" in response.json()["detail"]


def test_an_unknown_entry_is_a_404_and_get_is_not_allowed(alice_api, entry):
    assert alice_api.post("/api/entries/nope/samples/", samples()).status_code == 404
    assert alice_api.get(f"/api/entries/{entry.slug}/samples/").status_code == 405


def test_the_entry_status_has_its_scores_per_problem(api, alice, entry):
    three_samples(alice, entry)
    body = api.get(f"/api/entries/{entry.slug}/").json()
    assert body["finished"] is True and body["counts"]["done"] == 3
    scores = body["scores"]
    assert scores["pass_at_1"] == pytest.approx(2 / 9) and scores["complete"] is True
    (problem,) = scores["problems"]
    assert (problem["n"], problem["c"], problem["f"]) == (3, 2, 1)
    assert problem["pass_at_k"] == pytest.approx(1.0)
    outcomes = [a["outcome"] for s in body["samples"] for a in s["attempts"]]
    assert outcomes == ["passed", "passed", "wrong_answer"]


def test_the_entries_list_and_the_board_filter(api, alice, entry, charlie, charlie_team):
    three_samples(alice, entry)
    judged(team=charlie_team, user=charlie, speedup=1.2)
    (listed,) = api.get("/api/entries/?kind=model").json()["results"]
    assert listed["entry"]["slug"] == entry.slug
    assert api.get("/api/entries/?kind=agent").json()["results"] == []
    models = api.get("/api/leaderboard/?who=models").json()["rows"]
    assert [(r["team"], r["entry"], r["entry_kind"]) for r in models if r["rank"]] == [
        ("Claude Kernels", "claude-kernels", "model")
    ]
    people = api.get("/api/leaderboard/?who=people").json()["rows"]
    assert [r["team"] for r in people if r["rank"]] == ["Charlie Ltd"]
    assert api.get("/api/leaderboard/?who=robots").status_code == 400


# the dataset


@pytest.fixture
def charlies_private_results(charlie, charlie_team, problems):
    """Charlie's team: a counted pass (public on the board), an older superseded pass, a
    wrong answer, and a pass on a hidden problem; none of their code is public."""
    old = SubmissionFactory(team=charlie_team, user=charlie, done=True)
    ProblemResultFactory(
        submission=old, problem=problems["all-gather"], speedup=7.77, code_digest="old"
    )
    newer = judged(team=charlie_team, user=charlie, speedup=1.23, slug="all-gather")
    failing = SubmissionFactory(
        team=charlie_team, user=charlie, running=True, problems=["tp-linear"]
    )
    assert finish(failing.evaluation_id, wrong("tp-linear"))
    hidden = SubmissionFactory(team=charlie_team, user=charlie, done=True)
    ProblemResultFactory(submission=hidden, problem=problems["secret-op"], speedup=3.33)
    return newer


def read_csv(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_board_dataset_holds_attempts_and_counted_results_only(
    api, alice, entry, charlies_private_results
):
    three_samples(alice, entry)
    response = api.get("/api/leaderboard/dataset/csv/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = read_csv(response)
    assert list(rows[0]) == list(export.NAMES)
    attempts = [r for r in rows if r["row_kind"] == "attempt"]
    counted = [r for r in rows if r["row_kind"] == "counted"]
    assert [(r["sample"], r["attempt"], r["outcome"]) for r in attempts] == [
        ("1", "1", "passed"), ("2", "2", "passed"), ("3", "3", "wrong_answer")
    ]  # fmt: skip
    assert attempts[0]["speedup_low"] == "1.45" and attempts[0]["fast_1"] == "true"
    assert attempts[1]["fast_1"] == "false"
    assert attempts[0]["model_name"] == "claude" and attempts[0]["samples_per_problem"] == "3"
    assert [(r["team"], r["problem"], r["speedup"]) for r in counted] == [
        ("charlie-ltd", "all-gather", "1.23")
    ]
    text = response.content.decode()
    for private in ("7.77", "3.33", "secret-op", "tp-linear", "rank 1 differs", "charlie's"):
        assert private not in text
    assert all(r["code"] == "" for r in rows)  # no problem's solutions are public


def test_counted_rows_say_when_their_submission_was_sent(api, charlies_private_results):
    rows = read_csv(api.get("/api/leaderboard/dataset/csv/"))
    (counted,) = [r for r in rows if r["row_kind"] == "counted"]
    sent = Submission.objects.get(pk=counted["submission_id"]).created_at
    assert counted["submitted_at"] == sent.astimezone(UTC).isoformat()


def test_the_entry_dataset_in_parquet_carries_the_typed_columns(api, alice, entry):
    three_samples(alice, entry)
    response = api.get(f"/api/entries/{entry.slug}/dataset/parquet/")
    assert response.status_code == 200
    assert (
        response["Content-Disposition"] == 'attachment; filename="pkb-entry-claude-kernels.parquet"'
    )
    table = pq.read_table(io.BytesIO(response.content))
    assert table.schema.names == list(export.NAMES)
    assert table.schema.field("speedup").metadata[b"doc"].startswith(b"Reference time")
    rows = table.to_pylist()
    assert [r["passed"] for r in rows] == [True, True, False]
    assert rows[0]["speedup_high"] == pytest.approx(1.55)
    assert rows[0]["evaluated_on"].isoformat() == "2026-11-20"
    assert rows[0]["problem_version"] == rows[0]["problem_version_current"] == 1


def test_code_appears_once_its_problems_solutions_are_published(api, alice, entry, problems):
    three_samples(alice, entry)
    before = read_csv(api.get(f"/api/entries/{entry.slug}/dataset/csv/"))
    assert {r["code"] for r in before} == {""}
    problems["all-reduce"].solutions_public_after = timezone.now() - timedelta(minutes=1)
    problems["all-reduce"].save()
    after = read_csv(api.get(f"/api/entries/{entry.slug}/dataset/csv/"))
    assert {r["code"] for r in after} == {"def solution(x):\n    return x.clone()\n"}


def test_another_teams_unpublished_code_stays_out_when_one_problem_is_public(
    api, alice, entry, charlie, charlie_team, problems
):
    three_samples(alice, entry)
    theirs = SubmissionFactory(team=charlie_team, user=charlie, running=True,
                               problems=["all-gather"])  # fmt: skip
    theirs.bundle.save("b.zip", io.BytesIO(solving("all-gather")), save=True)
    assert finish(theirs.evaluation_id, passed("all-gather"))
    problems["all-reduce"].solutions_public_after = timezone.now() - timedelta(minutes=1)
    problems["all-reduce"].save()
    rows = read_csv(api.get("/api/leaderboard/dataset/csv/"))
    counted = [r for r in rows if r["team"] == "charlie-ltd"]
    assert counted and all(r["code"] == "" for r in counted)  # all-gather's are not public


def test_an_unknown_format_is_a_404(api, entry):
    assert api.get(f"/api/entries/{entry.slug}/dataset/xlsx/").status_code == 404
    assert api.get("/api/leaderboard/dataset/json/").status_code == 404


def test_the_schema_documents_the_entries_endpoints(api):
    schema = api.get("/api/schema/?format=json").json()
    for path in (
        "/api/entries/",
        "/api/entries/{slug}/samples/",
        "/api/entries/{slug}/batches/{id}/",
        "/api/entries/{slug}/dataset/{fmt}/",
        "/api/leaderboard/dataset/{fmt}/",
    ):
        assert path in schema["paths"], path


def test_a_batch_token_of_the_team_works_unattended(bob, entry):
    response = token_client(bob, "harness").post(
        f"/api/entries/{entry.slug}/samples/", samples(solving("all-gather")), format="multipart"
    )
    assert response.status_code == 201


def test_docs_list_every_column_of_the_dataset():
    documented = (REPO / "docs" / "dataset.md").read_text()
    for column in export.COLUMNS:
        assert f"| `{column.name}` |" in documented, column.name
