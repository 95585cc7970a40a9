"""A model entry's batch through the API, judged by real Celery workers on the real Redis on
the CPU profile: 3 samples x the 8 collective problems, then scored by pass@k."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from portal.accounts.services import team_create
from portal.api.services import api_token_create
from portal.entries.models import Entry
from portal.leaderboard.selectors import leaderboard_rows
from portal.problems.services import problems_sync
from portal.submissions.models import Submission
from tests.integration.test_end_to_end import _example_bundle

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

COLLECTIVES = 8
DEADLINE_S = 900  # three bundles of eight problems, one after another, on two shared cores


def _wait_until_judged(entry: Entry, logs: dict[str, Path]) -> None:
    # The workers are other processes: the database is the only thing to watch.
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        statuses = list(
            Submission.objects.filter(entry_sample__entry=entry).values_list("status", flat=True)
        )
        if statuses and all(s not in Submission.ACTIVE for s in statuses):
            return
        time.sleep(1.0)
    worker_logs = "\n".join(f"--- {k}\n{v.read_text()[-3000:]}" for k, v in logs.items())
    pytest.fail(f"samples of {entry.slug} still {statuses}\n{worker_logs}")


@pytest.mark.timeout(DEADLINE_S + 120)
def test_a_batch_of_three_samples_is_judged_and_scored_by_pass_at_k(workers, settings):
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 3  # each sample takes one of the team's slots
    problems_sync()
    alice = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team_create(owner=alice, name="Alice's Kernels")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=alice, name='harness')[1]}")
    declared = {"name": "Example Model", "kind": "model", "model_name": "examples/pytorch",
                "samples_per_problem": 3, "k": 2}  # fmt: skip
    assert api.post("/api/entries/", declared, format="json").status_code == 201

    # Two samples of the example, and a third whose all-gather is wrong.
    bundles = [_example_bundle(), _example_bundle(), _example_bundle(broken="all-gather")]
    uploads = [
        SimpleUploadedFile(f"sample_{i}.zip", data, content_type="application/zip")
        for i, data in enumerate(bundles, start=1)
    ]
    sent = api.post("/api/entries/example-model/samples/", {"samples": uploads}, format="multipart")
    assert sent.status_code == 201, sent.json()
    assert len(sent.json()["samples"]) == 3

    entry = Entry.objects.get(slug="example-model")
    _wait_until_judged(entry, workers)
    batch = api.get(sent.json()["url"]).json()
    assert batch["finished"] and batch["counts"]["done"] == 3, batch["counts"]
    problems = {p["problem"]: p for p in batch["scores"]["problems"]}
    assert len(problems) == COLLECTIVES and {p["n"] for p in problems.values()} == {3}
    assert problems["all-gather"]["c"] == 2, problems["all-gather"]
    assert all(p["c"] == 3 for slug, p in problems.items() if slug != "all-gather")
    assert problems["all-gather"]["pass_at_1"] == pytest.approx(2 / 3)
    assert problems["all-gather"]["pass_at_k"] == pytest.approx(1.0)  # 1 - C(1,2)/C(3,2)
    assert batch["scores"]["complete"] is True

    # Judged as ranked submissions, counted for the entry only.
    assert not [r for r in leaderboard_rows(profile="cpu") if r.is_ranked and not r.is_entry]
    (row,) = [r for r in leaderboard_rows(profile="cpu") if r.is_entry]
    assert row.entry_kind == "model" and row.score.solved == COLLECTIVES  # 7 x 3/3 + 2/3

    dataset = api.get("/api/entries/example-model/dataset/csv/")
    rows = list(csv.DictReader(io.StringIO(dataset.content.decode())))
    assert len(rows) == 3 * COLLECTIVES
    assert {r["hardware_profile"] for r in rows} == {"cpu"}
    assert all(r["evaluator_version"] and r["torch"] and r["problem_version"] for r in rows)
    assert sum(r["passed"] == "true" for r in rows) == 3 * COLLECTIVES - 1
