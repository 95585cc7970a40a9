"""Re-runs for the ranking: the top entries judged again with fresh seeds, boards ranked by
the median of each submission's judged runs, asked for by admins, a command or the beat."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from evaluator.contract import ProblemResult as Reported
from evaluator.contract import ProblemStatus
from portal import celery_app
from portal.leaderboard import tasks
from portal.leaderboard.reruns import problem_rerun_top
from portal.leaderboard.selectors import leaderboard_rows, problem_ranking
from portal.submissions.models import ProblemResult, Rerun
from tests.portal.factories import (
    MembershipFactory,
    ProblemResultFactory,
    SubmissionFactory,
    TeamFactory,
    UserFactory,
)
from tests.portal.judging import judge_rerun, judged, passed
from tests.portal.test_settings import load_settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def dora_team(db):
    team = TeamFactory(name="Dora's Collectives", slug="doras-collectives")
    MembershipFactory(user=UserFactory(username="dora"), team=team)
    return team


@pytest.fixture
def entries(team, alice, charlie_team, charlie, dora_team, problems):
    """On all-reduce: alice 2.0x, charlie 1.5x, dora 1.2x, each judged once."""
    dora = dora_team.memberships.get().user
    return {
        "alice": judged(team=team, user=alice, speedup=2.0),
        "charlie": judged(team=charlie_team, user=charlie, speedup=1.5),
        "dora": judged(team=dora_team, user=dora, speedup=1.2),
    }


def ranked_teams(problems) -> list[str]:
    return [r.team_slug for r in problem_ranking(problem=problems["all-reduce"], profile="cpu")]


def rerun(submission, problems):
    return Rerun.objects.create(
        submission=submission,
        problem=problems["all-reduce"],
        base_evaluation_id=submission.evaluation_id,
        problem_version=problems["all-reduce"].version,
        status=Rerun.Status.QUEUED,
    )


# ranking by the median of the runs


def test_the_board_ranks_by_the_median_of_the_judged_runs(entries, problems):
    assert ranked_teams(problems) == ["alices-kernels", "charlie-ltd", "doras-collectives"]
    # alice's 2.0x does not repeat: 1.2x and 1.3x on fresh inputs.
    judge_rerun(rerun(entries["alice"], problems), passed(speedup=1.2, low=1.15, high=1.25))
    judge_rerun(rerun(entries["alice"], problems), passed(speedup=1.3, low=1.25, high=1.35))
    assert ranked_teams(problems) == ["charlie-ltd", "alices-kernels", "doras-collectives"]
    row = problem_ranking(problem=problems["all-reduce"], profile="cpu")[1]
    assert (row.speedup, row.run_count) == (1.3, 3)
    # The ends count as the medians of the runs' ends (the submission's page shows their
    # envelope, 1.15-2.05): what the boards count.
    assert (row.speedup_low, row.speedup_high) == (1.25, 1.35)
    board = {r.team_slug: r for r in leaderboard_rows(profile="cpu") if not r.is_baseline}
    assert board["charlie-ltd"].rank == 1 and board["alices-kernels"].rank == 2
    assert board["alices-kernels"].score.geomean == pytest.approx(1.3)


def test_a_rerun_that_fails_takes_the_entry_off_the_board(entries, problems):
    wrong = Reported("all-reduce", ProblemStatus.WRONG_ANSWER, 4, message="rank 3 wrong")
    judge_rerun(rerun(entries["alice"], problems), wrong)
    assert ranked_teams(problems) == ["charlie-ltd", "doras-collectives"]


def test_one_run_ranks_exactly_as_before(team, alice, charlie_team, problems):
    judged(team=team, user=alice, speedup=1.7)
    # A result recorded before runs existed has none: it ranks by its own numbers.
    older = SubmissionFactory(team=charlie_team, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=older, problem=problems["all-reduce"], speedup=1.6)
    rows = problem_ranking(problem=problems["all-reduce"], profile="cpu")
    assert [(r.team_slug, r.speedup, r.run_count) for r in rows] == [
        ("alices-kernels", 1.7, 1),
        ("charlie-ltd", 1.6, 1),
    ]
    assert rows[0].speedup_low == pytest.approx(1.65) and rows[1].speedup_low is None


# queueing the top entries


def test_the_top_entries_are_queued_with_new_evaluation_ids(
    entries, problems, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        queued = problem_rerun_top(problem=problems["all-reduce"], top=2, reason="ranking")
    assert {r.submission_id for r in queued} == {entries["alice"].pk, entries["charlie"].pk}
    sent_ids = {request.evaluation_id for request, _ in sent}
    assert sent_ids == {str(r.evaluation_id) for r in queued}
    assert not sent_ids & {str(s.evaluation_id) for s in entries.values()}
    assert all(request.problems == ["all-reduce"] for request, _ in sent)


def test_entries_with_enough_runs_are_left_alone(entries, problems):
    judge_rerun(rerun(entries["alice"], problems), passed(speedup=2.1))
    queued = problem_rerun_top(problem=problems["all-reduce"], top=2, reason="r", below_runs=2)
    assert [r.submission_id for r in queued] == [entries["charlie"].pk]


# the beat


def test_the_beat_task_is_registered_and_scheduled(settings):
    celery_app.loader.import_default_modules()
    assert tasks.RERUN_TASK in celery_app.tasks
    assert celery_app.conf.beat_schedule["rerun-top"]["task"] == tasks.RERUN_TASK
    assert celery_app.conf.beat_schedule["rerun-top"]["schedule"] == settings.PKB_RERUN_EVERY_S


@pytest.mark.parametrize(
    "env", [{"PKB_RERUN_TOP": "0"}, {"PKB_RERUN_RUNS": "-1"}, {"PKB_RERUN_ENABLED": "sometimes"}]
)
def test_bad_rerun_settings_fail_at_start_up(env):
    result = load_settings(PKB_DEBUG="1", **env)
    assert result.returncode != 0 and next(iter(env)) in result.stderr


def test_the_beat_queues_nothing_when_off(entries, sent, settings):
    assert settings.PKB_RERUN_ENABLED is False  # the default
    assert tasks.rerun_top.apply().get() == {"queued": [], "failed": []}
    assert not Rerun.objects.exists() and sent == []


def test_the_beat_queues_the_top_n_until_each_has_its_runs(
    entries, problems, sent, settings, django_capture_on_commit_callbacks
):
    settings.PKB_RERUN_ENABLED, settings.PKB_RERUN_TOP, settings.PKB_RERUN_RUNS = True, 2, 2
    with django_capture_on_commit_callbacks(execute=True):
        report = tasks.rerun_top.apply().get()
    reruns = Rerun.objects.filter(pk__in=report["queued"])
    assert {r.submission_id for r in reruns} == {entries["alice"].pk, entries["charlie"].pk}
    assert len(sent) == 2
    # While they wait, a second beat queues nothing more.
    assert tasks.rerun_top.apply().get()["queued"] == []
    for each in reruns:
        judge_rerun(each, passed(speedup=1.9 if each.submission_id == entries["alice"].pk else 1.4))
    # Both have their two runs now: the beat is done with them.
    assert tasks.rerun_top.apply().get()["queued"] == []
    assert ProblemResult.objects.get(submission=entries["alice"]).speedup == pytest.approx(1.95)


# admins


def test_the_problem_admin_action_queues_the_top_entries(
    client, admin, entries, problems, settings, django_capture_on_commit_callbacks
):
    settings.PKB_RERUN_TOP = 1
    client.force_login(admin)
    changelist = reverse("admin:problems_problem_changelist")
    form = {"action": "rerun_top", "_selected_action": [problems["all-reduce"].pk]}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(changelist, form, follow=True)
    assert response.status_code == 200
    assert "1 re-run(s) queued" in response.content.decode()
    [queued] = Rerun.objects.all()
    assert queued.submission_id == entries["alice"].pk and queued.requested_by == admin
    entry = LogEntry.objects.get(object_id=str(problems["all-reduce"].pk))
    assert f"#{entries['alice'].pk}" in entry.get_change_message()


def test_the_submission_admin_action_adds_a_run_to_each_result(
    client, admin, entries, django_capture_on_commit_callbacks
):
    client.force_login(admin)
    changelist = reverse("admin:submissions_submission_changelist")
    form = {"action": "rerun", "_selected_action": [entries["dora"].pk]}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(changelist, form, follow=True)
    assert "1 re-run(s) queued" in response.content.decode()
    assert Rerun.objects.get().submission_id == entries["dora"].pk
    assert Rerun.objects.get().status == Rerun.Status.QUEUED


def test_the_rerun_admin_lists_them_read_only(client, admin, entries, problems):
    rerun(entries["alice"], problems)
    client.force_login(admin)
    response = client.get(reverse("admin:submissions_rerun_changelist"))
    assert response.status_code == 200 and "Alice" in response.content.decode()
    assert client.get(reverse("admin:submissions_rerun_add")).status_code == 403


def test_the_command_queues_the_top_entries(entries, problems, capsys):
    call_command("rerun_top", "all-reduce", "--top", "1")
    assert f"all-reduce: re-runs queued for submissions #{entries['alice'].pk}" in (
        capsys.readouterr().out
    )
    assert Rerun.objects.get().submission_id == entries["alice"].pk


def test_the_command_refuses_an_unknown_problem(problems):
    with pytest.raises(CommandError, match="no published problem: secret-op"):
        call_command("rerun_top", "secret-op")
