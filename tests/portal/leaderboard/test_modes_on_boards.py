"""Only ranked runs count: a test, benchmark or profile run that would top every board
reaches none of them, through the hosts' real recording path (issue 26)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.leaderboard.reruns import problem_rerun_top
from portal.leaderboard.selectors import leaderboard, problem_board, team_standing
from portal.ops.retention import retention_apply
from portal.problems.selectors import problem_stats
from portal.problems.timings import reference_timings
from portal.submissions.models import Submission
from portal.submissions.selectors import problem_public_solutions
from portal.submissions.services import problem_best_submissions, rerun_queue
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import finish, judged, passed

pytestmark = pytest.mark.django_db

OWN_MODES = [Submission.Mode.TEST, Submission.Mode.BENCHMARK, Submission.Mode.PROFILE]


def run(*, team, user, mode, speedup, slug="all-reduce") -> Submission:
    """A submission in `mode` judged once, recorded as a host's finished message is."""
    submission = SubmissionFactory(team=team, user=user, running=True, problems=[slug], mode=mode)
    assert finish(submission.evaluation_id, passed(slug, speedup, speedup - 0.1, speedup + 0.1))
    submission.refresh_from_db()
    return submission


@pytest.fixture
def boards(problems, alice, team, charlie, charlie_team):
    """Charlie's ranked 1.3x leads; Alice has only a slow ranked pass."""
    judged(team=charlie_team, user=charlie, speedup=1.3)
    judged(team=team, user=alice, speedup=0.5)
    return problems


def _board(problem) -> list[tuple[str, float]]:
    return [(r.team_name, r.speedup) for r in problem_board(problem=problem, profile="cpu").ranking]


@pytest.mark.parametrize("mode", OWN_MODES)
def test_a_run_that_would_top_the_board_does_not_reach_it(boards, alice, team, mode):
    run(team=team, user=alice, mode=mode, speedup=9.0)
    top = leaderboard(profile="cpu").rows[0]
    assert (top.team_name, top.rank) == ("Charlie Ltd", 1)
    alices = next(r for r in leaderboard(profile="cpu").rows if r.team_name == team.name)
    assert alices.score.faster == 0  # her ranked 0.5x, never the 9.0x
    assert _board(boards["all-reduce"]) == [("Charlie Ltd", 1.3), (team.name, 0.5)]
    standing = team_standing(team=team, profile="cpu")
    assert [b.speedup for b in standing.best] == [0.5]
    assert problem_stats(profile="cpu")[boards["all-reduce"].pk].best_speedup == 1.3


@pytest.mark.parametrize("mode", OWN_MODES)
def test_a_newer_own_run_does_not_replace_the_counted_ranked_code(boards, alice, team, mode):
    """The boards count a team's newest code; a later benchmark of other code is not it."""
    judged(team=team, user=alice, speedup=2.0)
    run(team=team, user=alice, mode=mode, speedup=0.2)
    assert _board(boards["all-reduce"]) == [(team.name, 2.0), ("Charlie Ltd", 1.3)]


def test_a_team_with_own_runs_only_is_not_on_the_board(problems, charlie, charlie_team):
    run(team=charlie_team, user=charlie, mode=Submission.Mode.BENCHMARK, speedup=3.0)
    assert [r.team_name for r in leaderboard(profile="cpu").rows if r.is_ranked] == []
    assert team_standing(team=charlie_team, profile="cpu").rank is None


def test_an_example_in_another_mode_is_no_example_row(problems, admin, team):
    submission = SubmissionFactory(
        team=team, user=admin, running=True, example_label="Example: fast", mode="benchmark"
    )
    assert finish(submission.evaluation_id, passed("all-reduce", 4.0))
    assert problem_board(problem=problems["all-reduce"], profile="cpu").examples == []


def test_reruns_and_reevaluations_leave_own_runs_alone(boards, alice, team, admin):
    own = run(team=team, user=alice, mode=Submission.Mode.BENCHMARK, speedup=9.0)
    problem = boards["all-reduce"]
    assert rerun_queue(submission=own, problem=problem, reason="by hand") is None
    reruns = problem_rerun_top(problem=problem, top=5, reason="top")
    assert own.pk not in {r.submission_id for r in reruns}
    assert own.pk not in {s.pk for s in problem_best_submissions(problem=problem)}


def test_own_runs_are_never_published_solutions(boards, alice, team, dana, client):
    own = run(team=team, user=alice, mode=Submission.Mode.BENCHMARK, speedup=9.0)
    problem = boards["all-reduce"]
    problem.solutions_public_after = timezone.now() - timedelta(days=1)
    problem.save()
    public = problem_public_solutions(problem)
    assert own.pk not in {r.submission_id for r in public}
    assert {r.speedup for r in public} == {1.3, 0.5}
    client.force_login(dana)
    assert client.get(reverse("submissions:bundle", args=[own.pk])).status_code == 404


def test_reference_times_come_from_ranked_runs(boards, alice, team):
    problem = boards["all-reduce"]
    problem.public_cases = [{"name": "dev-fp32", "dtype": "float32", "params": {"n": 8}}]
    problem.save()

    def case(ref_us):
        return {"case": "dev-fp32", "dtype": "float32", "passed": True, "ref_time_us": ref_us}

    own = SubmissionFactory(team=team, user=alice, running=True, mode=Submission.Mode.PROFILE)
    assert finish(own.evaluation_id, passed("all-reduce", 2.0, cases=[case(999.0)]))
    ranked = SubmissionFactory(team=team, user=alice, running=True)
    assert finish(ranked.evaluation_id, passed("all-reduce", 2.0, cases=[case(10.0)]))
    [cpu] = [t for t in reference_timings(problem) if t.profile.name == "cpu"]
    assert [(c.name, c.ref_us, c.source) for c in cpu.cases] == [("dev-fp32", 10.0, "1 judged run")]


def test_retention_keeps_no_own_run_bundle_for_the_boards(boards, alice, team):
    own = run(team=team, user=alice, mode=Submission.Mode.TEST, speedup=9.0)
    Submission.objects.filter(pk=own.pk).update(finished_at=timezone.now() - timedelta(days=40))
    report = retention_apply(days=30)
    assert own.pk in report.bundles_deleted


def test_the_public_team_page_lists_own_runs_to_the_team_only(client, boards, alice, team, charlie):
    own = run(team=team, user=alice, mode=Submission.Mode.PROFILE, speedup=9.0)
    url = reverse("leaderboard:team", args=[team.slug])
    outsider = client.get(url).content.decode()
    assert f'data-submission="{own.pk}"' not in outsider
    assert "mode-ranked" in outsider
    client.force_login(charlie)
    assert f'data-submission="{own.pk}"' not in client.get(url).content.decode()
    client.force_login(alice)
    body = client.get(url).content.decode()
    assert f'data-submission="{own.pk}"' in body and "mode-profile" in body
