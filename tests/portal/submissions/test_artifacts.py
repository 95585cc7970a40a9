"""A host's artifacts (a profile run's traces and tables): recorded with the results
through the hosts' real path, listed on the page and in the API, downloadable by the team
and staff only, never lost results for them (issue 26)."""

from __future__ import annotations

import base64
import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from evaluator.contract import (
    ARTIFACT_CAP_BYTES,
    EvaluationOutcome,
    finished_message,
)
from evaluator.contract import (
    Artifact as Made,
)
from portal.ops.retention import retention_apply
from portal.submissions.models import Artifact, Submission
from portal.submissions.services import evaluation_finish, submission_requeue
from tests.portal.api.conftest import token_client
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import passed

pytestmark = pytest.mark.django_db

TRACE = json.dumps({"traceEvents": [{"name": "ncclKernel_AllReduce", "ph": "X", "ts": 1}]})
TABLE = "kernel,calls,gpu_us\nncclKernel_AllReduce,10,812.5\n"


def made() -> list[Made]:
    return [
        Made.build(
            name="rank0.trace.json",
            media_type="application/json",
            data=TRACE.encode(),
            note="rank 0, case dev-fp32, 10 calls",
        ),
        Made.build(name="top-kernels.csv", media_type="text/csv", data=TABLE.encode()),
    ]


def finish(submission: Submission, artifacts=None, *, raw=None) -> bool:
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[passed("all-reduce", 1.2)],
        artifacts=artifacts,
    )
    if raw is not None:
        message["artifacts"] = raw
    return evaluation_finish(message=message)


@pytest.fixture
def profiled(team, alice, problems) -> Submission:
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    assert finish(submission, made())
    submission.refresh_from_db()
    return submission


def url(submission: Submission, name: str) -> str:
    return reverse("submissions:artifact", args=[submission.pk, name])


def stored(submission: Submission) -> list[Path]:
    root = Path(settings.MEDIA_ROOT) / "artifacts"
    return sorted(root.rglob("*.bin")) if root.exists() else []


def test_they_are_recorded_with_the_results(profiled):
    assert profiled.status == Submission.Status.DONE and profiled.results.count() == 1
    rows = {a.name: a for a in profiled.artifacts.all()}
    assert set(rows) == {"rank0.trace.json", "top-kernels.csv"}
    trace = rows["rank0.trace.json"]
    assert (trace.media_type, trace.size, trace.truncated) == (
        "application/json",
        len(TRACE),
        False,
    )
    assert trace.note == "rank 0, case dev-fp32, 10 calls"
    assert trace.evaluation_id == profiled.evaluation_id
    assert trace.file.name.startswith(f"artifacts/{profiled.team_id}/{profiled.pk}/")
    assert trace.file.name.endswith(".bin")  # never the host's name or extension on disk
    assert Path(trace.file.path).read_text() == TRACE


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "raw",
    [
        "not a list",
        [{"name": "../../etc/passwd", "media_type": "text/plain", "data_b64": _b64(b"x")}],
        [{"name": "page.html", "media_type": "text/html", "data_b64": _b64(b"<script>")}],
        [{"name": "a.csv", "media_type": "text/csv", "data_b64": "%%% not base64"}],
        [{"name": "a.csv", "media_type": "text/csv", "data_b64": _b64(b"1")}] * 2,
    ],
)
def test_artifacts_that_break_the_contract_are_dropped_and_the_results_kept(
    team, alice, problems, raw, caplog
):
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    with caplog.at_level(logging.ERROR):
        assert finish(submission, raw=raw)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE and submission.results.count() == 1
    assert not Artifact.objects.exists() and stored(submission) == []
    assert "artifacts dropped, results kept" in caplog.text


def test_a_file_that_cannot_be_written_leaves_the_results_whole(team, alice, problems, caplog):
    Path(settings.MEDIA_ROOT).mkdir(parents=True, exist_ok=True)
    (Path(settings.MEDIA_ROOT) / "artifacts").write_text("a file where the folder goes")
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    with caplog.at_level(logging.ERROR):
        assert finish(submission, made())
    submission.refresh_from_db()
    assert submission.status == Submission.Status.DONE and submission.results.count() == 1
    assert not Artifact.objects.exists()
    assert "artifact rank0.trace.json not kept" in caplog.text


def test_the_team_and_staff_download_them_as_attachments(client, profiled, alice, bob, admin):
    for user in (alice, bob, admin):
        client.force_login(user)
        response = client.get(url(profiled, "rank0.trace.json"))
        assert response.status_code == 200
        assert b"".join(response.streaming_content).decode() == TRACE
        assert response["Content-Type"] == "application/json"
        assert response["Content-Disposition"] == 'attachment; filename="rank0.trace.json"'
        assert response["X-Content-Type-Options"] == "nosniff"
    table = client.get(url(profiled, "top-kernels.csv"))
    assert table["Content-Type"] == "text/csv; charset=utf-8"


def test_another_team_gets_a_404_and_anonymous_the_login(client, profiled, charlie):
    response = client.get(url(profiled, "rank0.trace.json"))
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(charlie)
    assert client.get(url(profiled, "rank0.trace.json")).status_code == 404
    assert client.get(url(profiled, "nothing.csv")).status_code == 404


def test_an_unknown_name_or_a_write_is_refused(client, profiled, alice):
    client.force_login(alice)
    assert client.get(url(profiled, "nothing.csv")).status_code == 404
    assert client.post(url(profiled, "top-kernels.csv")).status_code == 405


def test_the_page_lists_them_and_says_how_to_open_a_trace(client, profiled, alice):
    client.force_login(alice)
    body = client.get(reverse("submissions:detail", args=[profiled.pk])).content.decode()
    assert 'data-artifact="rank0.trace.json"' in body and 'data-artifact="top-kernels.csv"' in body
    assert url(profiled, "rank0.trace.json") in body
    assert "rank 0, case dev-fp32, 10 calls" in body
    assert "https://ui.perfetto.dev" in body and "Open trace file" in body
    assert "chrome://tracing" in body
    assert "badge timeout truncated" not in body  # nothing was cut


def test_a_cut_trace_is_marked(client, team, alice, problems):
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    big = Made.build(
        name="rank1.trace.json",
        media_type="application/json",
        data=b"x" * (ARTIFACT_CAP_BYTES + 10),
    )
    assert big.truncated
    assert finish(submission, [big])
    [row] = Artifact.objects.all()
    assert row.truncated and row.size == ARTIFACT_CAP_BYTES
    client.force_login(alice)
    body = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert "cut at 8 MiB" in body


def test_the_api_lists_and_serves_them_to_the_team_only(profiled, alice, charlie, client):
    alice_api = token_client(alice)
    data = alice_api.get(reverse("api:submission", args=[profiled.pk])).json()
    listed = {a["name"]: a for a in data["artifacts"]}
    assert listed["rank0.trace.json"]["size"] == len(TRACE)
    assert listed["rank0.trace.json"]["truncated"] is False
    assert listed["top-kernels.csv"]["media_type"] == "text/csv"
    download = listed["rank0.trace.json"]["url"]
    assert download.endswith(
        reverse("api:submission-artifact", args=[profiled.pk, "rank0.trace.json"])
    )
    response = alice_api.get(download)
    assert response.status_code == 200 and b"".join(response.streaming_content).decode() == TRACE
    assert response["Content-Disposition"] == 'attachment; filename="rank0.trace.json"'
    assert token_client(charlie).get(download).status_code == 404
    assert client.get(download).status_code == 401


def test_a_new_attempt_discards_the_old_ones(
    profiled, team, alice, django_capture_on_commit_callbacks
):
    files = stored(profiled)
    assert len(files) == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_requeue(submission=profiled, reason="Started over by admin.")
    assert not profiled.artifacts.exists()
    assert stored(profiled) == []


def test_retention_deletes_their_files_and_the_page_says_so(client, profiled, alice):
    Submission.objects.filter(pk=profiled.pk).update(
        finished_at=timezone.now() - timedelta(days=40)
    )
    assert retention_apply(days=30).artifacts_deleted == 2
    assert stored(profiled) == [] and profiled.artifacts.count() == 2
    client.force_login(alice)
    assert client.get(url(profiled, "rank0.trace.json")).status_code == 404
    body = client.get(reverse("submissions:detail", args=[profiled.pk])).content.decode()
    assert "(file deleted with the run's other old data)" in body
    data = token_client(alice).get(reverse("api:submission", args=[profiled.pk])).json()
    assert {a["url"] for a in data["artifacts"]} == {None}
