"""`pkb submit --mode/--profile/--case`, `pkb profiles`, `pkb quota` and `pkb download`
against a real server (issue 26)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from evaluator.contract import Artifact, EvaluationOutcome, finished_message
from evaluator.host import liveness
from portal.api.services import api_token_create
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_finish
from tests.cli.test_cli import reported, run
from tests.portal.bundles import solving
from tests.portal.conftest import liveness_keys  # noqa: F401  (a fixture)
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db(transaction=True)

TRACE = json.dumps({"traceEvents": [{"name": "ncclKernel_AllReduce", "ph": "X", "ts": 1}]})


@pytest.fixture
def bundle(tmp_path, problems) -> Path:
    path = tmp_path / "kernels.zip"
    path.write_bytes(solving("all-reduce"))
    return path


@pytest.mark.parametrize("mode", ["test", "benchmark", "ranked", "profile"])
def test_submit_in_each_mode(capsys, as_alice, bundle, mode):
    code, _, err = run(capsys, "submit", str(bundle), "--mode", mode)
    submission = Submission.objects.get()
    assert code == 0 and submission.mode == mode
    assert f"Submitted #{submission.pk} for Alice's Kernels: a {mode} run on cpu," in err


def test_submit_a_profile_run_of_a_public_case(capsys, as_alice, bundle, problems):
    problem = problems["all-reduce"]
    problem.public_cases = [{"name": "dev-fp32", "dtype": "float32", "params": {}}]
    problem.save()
    code, _, _ = run(capsys, "submit", str(bundle), "--mode", "profile", "--case", "dev-fp32")
    assert code == 0 and Submission.objects.get().profile_case == "dev-fp32"
    code, _, err = run(capsys, "submit", str(bundle), "--mode", "profile", "--case", "demo-1m")
    assert code == 3 and "'demo-1m' is not a public case of all-reduce" in err


def test_a_case_without_profile_mode_is_a_usage_error(capsys, as_alice, bundle):
    code, _, err = run(capsys, "submit", str(bundle), "--case", "dev-fp32")
    assert code == 2 and "--case names the case to profile" in err
    assert not Submission.objects.exists()


def test_an_unknown_mode_is_refused_by_pkb_itself(capsys, as_alice, bundle):
    with pytest.raises(SystemExit) as exited:
        run(capsys, "submit", str(bundle), "--mode", "rank")
    assert exited.value.code == 2
    assert "invalid choice: 'rank'" in capsys.readouterr().err


def test_an_unknown_profile_gets_the_known_ones(capsys, as_alice, bundle):
    code, _, err = run(capsys, "submit", str(bundle), "--profile", "tpu")
    assert code == 3 and "Unknown hardware profile 'tpu'; known: cpu, h200x2, h200x4" in err


def test_a_profile_without_a_worker_is_queued_and_said_to_wait(
    capsys,
    as_alice,
    bundle,
    liveness_keys,  # noqa: F811
):
    code, _, err = run(capsys, "submit", str(bundle), "--profile", "h200x8")
    assert code == 0 and Submission.objects.get().profile == "h200x8"
    assert "a ranked run on h200x8" in err
    assert "No h200x8 worker (8x H200 (NVLink)) is connected now: the run waits" in err


def test_profiles_say_which_have_a_worker(capsys, as_alice, liveness_keys):  # noqa: F811
    liveness.announce_worker(liveness_keys, profile="cpu", name="pkb-cpu@a")
    code, out, _ = run(capsys, "profiles")
    [cpu] = [line for line in out.splitlines() if line.strip().startswith("cpu")]
    assert code == 0 and "cpu (default)" in cpu and "1 worker connected" in cpu
    [h200x4] = [line for line in out.splitlines() if line.strip().startswith("h200x4")]
    assert "no worker connected: a run waits until one is" in h200x4


def test_quota_shows_each_mode_and_a_full_one_refuses_with_when(
    capsys, as_alice, alice, team, bundle, settings
):
    settings.PKB_BENCHMARK_RUNS_PER_HOUR = 1
    settings.PKB_MAX_ENTRIES_PER_TEAM = 5
    earlier = SubmissionFactory(team=team, user=alice, done=True, mode="benchmark")
    Submission.objects.filter(pk=earlier.pk).update(
        created_at=timezone.now() - timedelta(minutes=20)
    )
    code, out, err = run(capsys, "quota")
    assert code == 0
    assert "benchmark: 1 of 1 benchmark runs used in the last hour" in out
    assert "ranked: 0 of " in out and "ranked runs used in the last 24 hours" in out
    # Entries share the team's budget, and pkb says how many the team may register.
    assert "0 of 5 model or agent entries registered." in out
    assert "benchmark: Your team has used 1 of 1 benchmark runs in the last hour; next at" in err
    code, _, err = run(capsys, "submit", str(bundle), "--mode", "benchmark")
    assert code == 3
    assert "Your team has used 1 of 1 benchmark runs in the last hour; next at " in err
    assert "(retry after" in err
    assert run(capsys, "submit", str(bundle), "--mode", "test")[0] == 0


def _profiled(team, alice) -> Submission:
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    artifacts = [
        Artifact.build(
            name="rank0.trace.json",
            media_type="application/json",
            data=TRACE.encode(),
            note="rank 0, dev-fp32",
        ),
        Artifact.build(name="top-kernels.md", media_type="text/markdown", data=b"| k |\n"),
    ]
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[reported("all-reduce")],
        artifacts=artifacts,
    )
    assert evaluation_finish(message=message)
    return submission


def test_status_labels_the_run_and_lists_its_artifacts(capsys, as_alice, alice, team, problems):
    submission = _profiled(team, alice)
    code, out, _ = run(capsys, "status", str(submission.pk))
    assert code == 0
    assert f"Submission #{submission.pk} (bundle.zip, a profile run on cpu): done" in out
    assert "rank0.trace.json" in out and "rank 0, dev-fp32" in out
    assert f"pkb download {submission.pk}" in out
    assert "https://ui.perfetto.dev" in out and "chrome://tracing" in out


def test_download_saves_the_artifacts(capsys, as_alice, alice, team, problems, tmp_path):
    submission = _profiled(team, alice)
    folder = tmp_path / "traces"
    code, _, err = run(capsys, "download", str(submission.pk), "--to", str(folder))
    assert code == 0
    assert (folder / "rank0.trace.json").read_text() == TRACE
    assert (folder / "top-kernels.md").read_text() == "| k |\n"
    assert "Open trace file" in err
    code, _, err = run(capsys, "download", str(submission.pk), "nothing.csv")
    assert code == 2 and "has no artifact 'nothing.csv'" in err


def test_another_team_cannot_download_them(
    capsys, monkeypatch, site, alice, team, charlie, problems, tmp_path
):
    submission = _profiled(team, alice)
    monkeypatch.setenv("PKB_TOKEN", api_token_create(user=charlie, name="ci")[1])
    folder = tmp_path / "traces"
    code, _, err = run(capsys, "download", str(submission.pk), "--to", str(folder))
    assert code == 3 and "No Submission matches the given query." in err
    assert not folder.exists()
