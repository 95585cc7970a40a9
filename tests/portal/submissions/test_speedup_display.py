"""Speedups with their interval on the pages: "1.84× (1.80–1.88)", the speedup alone where
no interval was reported; the submission page lists each judged run."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.submissions.models import ProblemResult, Rerun
from portal.submissions.services import rerun_queue
from portal.submissions.templatetags.results import speedup_interval
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import judge_rerun, judged, passed


@pytest.mark.parametrize(
    "item, shown",
    [
        ({"speedup": 1.84, "speedup_low": 1.8, "speedup_high": 1.88}, "1.84× (1.80–1.88)"),
        ({"speedup": 1.84, "speedup_low": None, "speedup_high": None}, "1.84×"),
        ({"speedup": 1.84}, "1.84×"),  # a case row of an older host
        ({"speedup": None, "speedup_low": 1.0, "speedup_high": 2.0}, "—"),
        ({"speedup": "", "speedup_low": "", "speedup_high": ""}, "—"),
        (ProblemResult(speedup=0.5, speedup_low=0.41, speedup_high=0.6), "0.50× (0.41–0.60)"),
        (ProblemResult(speedup=2.0), "2.00×"),
    ],
)
def test_the_filter(item, shown):
    assert speedup_interval(item) == shown


@pytest.fixture
def rerun_twice(alice, team, problems):
    submission = judged(team=team, user=alice, speedup=1.5)
    rerun = rerun_queue(submission=submission, problem=problems["all-reduce"], reason="ranking")
    judge_rerun(rerun, passed(speedup=1.3, low=1.28, high=1.33))
    return submission


@pytest.mark.django_db
def test_the_submission_page_shows_the_median_its_interval_and_each_run(client, alice, rerun_twice):
    client.force_login(alice)
    html = client.get(reverse("submissions:detail", args=[rerun_twice.pk])).content.decode()
    assert "1.40× (1.28–1.55)" in html and "median of 2 runs" in html
    runs = html[html.index('id="runs-all-reduce"') :]
    first, second = ProblemResult.objects.get(submission=rerun_twice).runs.all()
    assert f'data-seed="{first.seed}"' in runs and f'data-seed="{second.seed}"' in runs
    assert "1.50× (1.45–1.55)" in runs and "1.30× (1.28–1.33)" in runs
    assert "on gpu-2" in runs


@pytest.mark.django_db
def test_the_submission_page_shows_a_rerun_waiting(client, alice, rerun_twice, problems):
    rerun_queue(submission=rerun_twice, problem=problems["all-reduce"], reason="for the ranking")
    client.force_login(alice)
    html = client.get(reverse("submissions:status", args=[rerun_twice.pk])).content.decode()
    assert "Re-run queued" in html and "for the ranking" in html
    assert Rerun.objects.filter(status=Rerun.Status.QUEUED).count() == 1


@pytest.mark.django_db
def test_the_case_table_shows_each_cases_interval(client, alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        cases=[
            {"case": "eval-1m", "dtype": "bfloat16", "passed": True, "time_us": 80.0,
             "speedup": 1.48, "speedup_low": 1.44, "speedup_high": 1.51},
            {"case": "eval-16m", "dtype": "bfloat16", "passed": True, "time_us": 800.0},
        ],
    )  # fmt: skip
    client.force_login(alice)
    html = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert "1.48× (1.44–1.51)" in html


@pytest.mark.django_db
def test_the_problem_and_team_pages_show_the_interval(client, rerun_twice, team):
    problem_page = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    section = problem_page[problem_page.index('id="problem-ranking"') :]
    # The boards show what they count: the medians of the runs' ends (the submission's
    # page shows their envelope, 1.28–1.55).
    assert "1.40× (1.36–1.44)" in section and "2 runs" in section
    team_page = client.get(reverse("leaderboard:team", args=[team.slug])).content.decode()
    assert "1.40× (1.36–1.44)" in team_page
