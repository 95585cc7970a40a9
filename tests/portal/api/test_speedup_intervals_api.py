"""The speedup's interval and the judged runs in the API and its schema."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.submissions.services import rerun_queue
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import judge_rerun, judged, passed

pytestmark = pytest.mark.django_db


@pytest.fixture
def rerun_twice(alice, team, problems):
    """alice's all-reduce judged at 1.5x (1.45–1.55), then again at 1.3x (1.28–1.33)."""
    submission = judged(team=team, user=alice, speedup=1.5)
    rerun = rerun_queue(submission=submission, problem=problems["all-reduce"], reason="ranking")
    judge_rerun(rerun, passed(speedup=1.3, low=1.28, high=1.33))
    return submission


def test_a_result_carries_its_interval_and_its_runs(alice_api, rerun_twice):
    data = alice_api.get(reverse("api:submission", args=[rerun_twice.pk])).json()
    [result] = data["results"]
    assert result["speedup"] == pytest.approx(1.4)
    assert (result["speedup_low"], result["speedup_high"]) == (1.28, 1.55)
    assert result["run_count"] == 2
    first, second = result["runs"]
    assert first["seed"] == rerun_twice.evaluation_id.hex[:12]
    assert (second["speedup"], second["speedup_low"], second["speedup_high"]) == (1.3, 1.28, 1.33)
    assert first["judged_at"] <= second["judged_at"]
    assert "log" not in first and "message" not in first


def test_a_result_of_an_older_host_has_null_interval_and_no_runs(alice_api, alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=2.0)
    [result] = alice_api.get(reverse("api:submission", args=[submission.pk])).json()["results"]
    assert result["speedup"] == 2.0
    assert result["speedup_low"] is None and result["speedup_high"] is None
    assert result["run_count"] == 1 and result["runs"] == []


def test_the_problem_ranking_carries_the_interval_and_the_run_count(api, rerun_twice):
    url = reverse("api:problem-leaderboard", args=["all-reduce"])
    [row] = api.get(url).json()["rows"]
    assert row["speedup"] == pytest.approx(1.4) and row["run_count"] == 2
    # The counted ends: the medians of the runs' (1.45 and 1.28, 1.55 and 1.33).
    assert row["speedup_low"] == pytest.approx(1.365)
    assert row["speedup_high"] == pytest.approx(1.44)
    assert "submission_id" not in row  # submissions stay private to their team


def test_the_schema_describes_the_new_fields(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    components = schema["components"]["schemas"]
    result = components["ProblemResult"]["properties"]
    assert {"speedup_low", "speedup_high", "run_count", "runs"} <= set(result)
    assert result["speedup_low"]["nullable"] is True
    run = components["ResultRun"]["properties"]
    assert {"judged_at", "seed", "speedup", "speedup_low", "speedup_high", "time_us"} <= set(run)
    row = components["ProblemRankingRow"]["properties"]
    assert {"speedup_low", "speedup_high", "run_count"} <= set(row)
