from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.leaderboard import freshness
from portal.submissions.models import Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import flagged, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(team, alice, bob, problems):
    """Alice's Kernels: three submissions on the CPU, one on 4x H200."""
    submit(team, {problems["all-reduce"]: 0.8, problems["all-gather"]: "wrong_answer"}, minutes=1)
    submit(team, {problems["all-reduce"]: 1.5, problems["all-gather"]: 1.2}, minutes=2)
    last = submit(team, {problems["all-gather"]: 1.1, problems["tp-linear"]: 2.5}, minutes=3)
    ProblemResult = last.results.model
    ProblemResult.objects.filter(submission=last).update(log="SECRET-LOG-LINE")
    Submission.objects.filter(pk=last.pk).update(bundle_name="secret-kernels.zip")
    submit(team, {problems["all-reduce"]: 4.0}, minutes=4, profile="h200x4")
    return team


def page(client, team, **query):
    response = client.get(reverse("leaderboard:team", args=[team.slug]), query)
    assert response.status_code == 200
    return response


def test_it_shows_members_best_results_and_history(client, history):
    response = page(client, history, profile="cpu")
    html = response.content.decode()
    assert 'id="team-members"' in html and "alice" in html and "bob" in html
    standing = response.context["standing"]
    assert [(b.slug, b.speedup) for b in standing.best] == [
        ("all-gather", 1.1),  # the newest code's
        ("all-reduce", 1.5),
        ("tp-linear", 2.5),
    ]
    assert (standing.score.fast_1, standing.rank, standing.teams) == (1.0, 1, 1)
    assert html.count('data-submission="') == 4  # every profile's submissions are listed


def test_it_never_shows_code_logs_or_bundle_names(client, history):
    html = page(client, history, profile="cpu").content.decode()
    assert "SECRET-LOG-LINE" not in html and "secret-kernels" not in html
    assert "bundle.zip" not in html


def test_the_fast_1_history_steps_up_with_each_improvement(client, history):
    standing = page(client, history, profile="cpu").context["standing"]
    assert [share for _, share in standing.fast_1_history] == [0.0, 2 / 3, 1.0]
    html = page(client, history, profile="cpu").content.decode()
    chart = html[html.index('id="fast1-history"') :]
    assert "<svg" in chart[: chart.index("</figure>")] and 'class="curve"' in chart


def test_it_draws_the_fast_p_curve(client, history):
    html = page(client, history, profile="cpu").content.decode()
    assert 'class="chart fastp-chart"' in html and "fast_1 100%" in html


def test_it_shows_the_profile_of_the_latest_submission_by_default(client, history):
    response = page(client, history)
    assert response.context["profile"].name == "h200x4"
    assert [b.slug for b in response.context["standing"].best] == ["all-reduce"]


def test_other_profiles_and_flagged_results_are_kept_apart(client, history, problems):
    flagged(history, problems["tp-linear"], speedup=90.0, minutes=9)
    standing = page(client, history, profile="cpu").context["standing"]
    assert dict((b.slug, b.speedup) for b in standing.best)["tp-linear"] == 2.5


def test_a_team_without_results_renders(client, charlie_team):
    html = page(client, charlie_team).content.decode()
    assert "No submissions yet" in html and "Not ranked" in html


def test_unfinished_submissions_show_their_status_only(client, team, problems):
    running = SubmissionFactory(team=team, running=True, problems=["all-reduce"])
    ProblemResultFactory(submission=running, problem=problems["all-reduce"], speedup=3.0)
    response = page(client, team)
    assert response.context["standing"].best == []
    assert f'data-submission="{running.pk}"' in response.content.decode()


def test_leaderboard_rows_link_to_team_pages(client, history):
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert f'href="/teams/{history.slug}/?profile=cpu"' in html


@pytest.mark.parametrize("query", [{"profile": "tpu"}])
def test_an_unknown_profile_is_a_404(client, history, query):
    assert client.get(reverse("leaderboard:team", args=[history.slug]), query).status_code == 404


def test_an_unknown_team_is_a_404(client, db):
    assert client.get(reverse("leaderboard:team", args=["nobody"])).status_code == 404


def test_the_team_page_rejects_wrong_method(client, team):
    assert client.post(reverse("leaderboard:team", args=[team.slug])).status_code == 405


def test_the_team_page_is_public(client, team):
    other = TeamFactory(name="Other")
    assert client.get(reverse("leaderboard:team", args=[other.slug])).status_code == 200


# --- shares beside counts --------------------------------------------------------------


def test_the_team_page_gives_counts_of_problems_and_unlabelled_shares_at_weight_1(client, history):
    html = page(client, history, profile="cpu").content.decode()
    counts = "3 of 3 problems faster than the reference, 3 of 3 solved"
    assert f'<span id="team-counts">{counts}</span>' in html
    assert '<dd data-category="collective">fast<sub>1</sub> 100% · 2 of 2 solved</dd>' in html
    assert "weighted" not in html


def test_on_a_weighted_scope_the_team_pages_shares_say_so(client, team, problems):
    problems["tp-linear"].weight = 2.0
    problems["tp-linear"].save()
    submit(team, {problems["all-reduce"]: 1.5, problems["all-gather"]: 0.9})
    html = page(client, team, profile="cpu").content.decode()
    # fast_1: a weight of 1 of 4; by count 1 of 3 problems.
    assert "fast<sub>1</sub> <strong>25%</strong>" in html
    assert "(shares weighted by the problems' weights)" in html
    counts = "1 of 3 problems faster than the reference, 2 of 3 solved"
    assert f'<span id="team-counts">{counts}</span>' in html
    dd = '<dd data-category="collective">fast<sub>1</sub> 50% weighted · 2 of 2 solved</dd>'
    assert dd in html


# --- the submissions' badges -------------------------------------------------------------


def test_a_done_submission_that_passed_nothing_is_not_a_green_done(client, team, problems):
    failed = submit(team, {problems["all-reduce"]: "wrong_answer"}, minutes=1)
    passed = submit(team, {problems["all-gather"]: 1.2}, minutes=2)
    html = page(client, team).content.decode()
    row = html[html.index(f'data-submission="{failed.pk}"') :]
    row = row[: row.index("</tr>")]
    assert '<span class="badge done-none-passed failed">Done: none passed</span>' in row
    row = html[html.index(f'data-submission="{passed.pk}"') :]
    assert '<span class="badge done">Done</span>' in row[: row.index("</tr>")]


def test_the_team_pages_badges_take_no_query_per_submission(client, team, problems):
    def queries() -> int:
        freshness.forget()
        with CaptureQueriesContext(connection) as captured:
            html = page(client, team).content.decode()
        assert html.count("Done: none passed") == len(Submission.objects.filter(team=team))
        return len(captured)

    submit(team, {problems["all-reduce"]: "wrong_answer"})
    one = queries()
    for minute in range(1, 5):
        submit(team, {problems["all-reduce"]: "wrong_answer"}, minutes=minute)
    assert queries() == one


def test_a_disqualified_team_is_not_ranked_on_its_page(client, history):
    from portal.accounts.services import team_disqualify

    assert page(client, history).context["standing"].rank == 1
    team_disqualify(team=history, reason="Replayed cached outputs.")
    response = page(client, history)
    assert response.context["standing"].rank is None
    html = response.content.decode()
    assert 'id="team-rank"' not in html and "Not ranked" in html
    assert 'id="team-disqualified"' in html
