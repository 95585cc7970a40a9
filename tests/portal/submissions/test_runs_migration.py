"""Migration 0005: every result recorded before runs existed gets its first run, and ranks
as before."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("submissions", "0004_problem_versions")]
AFTER = [("submissions", "0005_speedup_interval_and_runs")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()  # the graph as the database now stands
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def back_to_latest():
    """Whatever other migrations follow 0005 are applied again for the next tests."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_existing_results_get_their_first_run(alice, team, problems, back_to_latest):
    apps = migrate(BEFORE)
    Submission = apps.get_model("submissions", "Submission")
    ProblemResult = apps.get_model("submissions", "ProblemResult")
    finished = timezone.now()
    submission = Submission.objects.create(
        team_id=team.pk,
        user_id=alice.pk,
        bundle="submissions/x.zip",
        bundle_name="x.zip",
        bundle_sha256="0" * 64,
        profile="cpu",
        problems=["all-reduce"],
        status="done",
        evaluation_id=uuid.uuid4(),
        finished_at=finished,
        host="gpu-host-1",
    )
    ProblemResult.objects.create(
        submission_id=submission.pk,
        problem_id=problems["all-reduce"].pk,
        problem_version=problems["all-reduce"].version,
        status="passed",
        world_size=4,
        time_us=80.0,
        ref_time_us=120.0,
        speedup=1.5,
        cases=[{"case": "eval-1m", "time_us": 80.0}],
    )
    apps = migrate(AFTER)
    result = apps.get_model("submissions", "ProblemResult").objects.get()
    assert result.run_count == 1 and result.speedup == 1.5 and result.speedup_low is None
    run = apps.get_model("submissions", "ResultRun").objects.get()
    assert run.result_id == result.pk and run.evaluation_id == submission.evaluation_id
    assert run.judged_at == finished and run.host == "gpu-host-1"
    assert (run.status, run.time_us, run.speedup, run.cases) == (
        "passed",
        80.0,
        1.5,
        [{"case": "eval-1m", "time_us": 80.0}],
    )
