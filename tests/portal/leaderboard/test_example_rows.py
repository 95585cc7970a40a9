"""Example bundles on the boards: a labelled row beside the baseline, never a rank."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.leaderboard.selectors import (
    BASELINE_NAME,
    leaderboard,
    leaderboard_rows,
    problem_board,
    problem_ranking,
    team_standing,
)
from portal.submissions.services import problem_best_submissions
from tests.portal.factories import ProblemResultFactory, TeamFactory
from tests.portal.leaderboard.test_leaderboard_rows import submit

pytestmark = pytest.mark.django_db

FAST = "Example: examples/fast"


@pytest.fixture
def p(problems):
    return problems


@pytest.fixture
def staff_team(db):
    return TeamFactory(name="Examples", slug="examples")


def example(team, results: dict, *, label: str = FAST, **kwargs):
    return submit(team, results, example_label=label, **kwargs)


def board_table(rows) -> list[tuple]:
    return [(r.rank, r.team_name, r.is_example, r.score.faster) for r in rows]


def test_an_example_faster_than_every_team_takes_no_rank(p, staff_team):
    a, b = TeamFactory(name="A"), TeamFactory(name="B")
    submit(a, {p["all-reduce"]: 1.5})
    submit(b, {p["all-reduce"]: 0.5})
    example(staff_team, {p["all-reduce"]: 3.0, p["all-gather"]: 2.0, p["tp-linear"]: 2.0})
    board = leaderboard(profile="cpu")
    assert board_table(board.rows) == [
        (None, FAST, True, 3),
        (1, "A", False, 1),
        (None, BASELINE_NAME, False, 0),
        (2, "B", False, 0),
    ]
    assert board.teams == 2
    [row] = [r for r in board.rows if r.is_example]
    assert row.label == FAST and row.team_slug == "" and not row.is_ranked


def test_a_team_that_matches_the_example_stands_above_it(p, staff_team):
    # The example got there first; a tie still goes to the team, which ranks first.
    example(staff_team, {p["all-reduce"]: 2.0}, minutes=0)
    submit(TeamFactory(name="Matcher"), {p["all-reduce"]: 2.0}, minutes=30)
    assert board_table(leaderboard_rows(profile="cpu")) == [
        (1, "Matcher", False, 1),
        (None, FAST, True, 1),
        (None, BASELINE_NAME, False, 0),
    ]
    [first, second] = problem_board(problem=p["all-reduce"], profile="cpu").entries[:2]
    assert (first.kind, second.kind) == ("team", "example")


def test_the_examples_team_has_no_standing_of_its_own(p, staff_team):
    example(staff_team, {p["all-reduce"]: 3.0})
    standing = team_standing(team=staff_team, profile="cpu")
    assert standing.rank is None and standing.best == [] and standing.score.solved == 0
    assert standing.teams == 0


def test_a_problem_with_only_an_example_ranks_nobody(client, p, staff_team):
    example(staff_team, {p["tp-linear"]: 1.7})
    assert problem_ranking(problem=p["tp-linear"], profile="cpu") == []
    board = problem_board(problem=p["tp-linear"], profile="cpu")
    assert [(r.label, r.speedup) for r in board.examples] == [(FAST, 1.7)]
    assert [e.kind for e in board.entries] == ["example", "baseline"]
    tensor = leaderboard(profile="cpu", category="tensor")
    assert board_table(tensor.rows) == [
        (None, FAST, True, 1),
        (None, BASELINE_NAME, False, 0),
    ]
    assert tensor.teams == 0
    html = client.get(reverse("problems:detail", args=["tp-linear"])).content.decode()
    assert "No team has solved this problem" in html and 'data-example="Example: ' in html


def test_the_problem_table_orders_teams_examples_and_the_reference_by_speed(p, staff_team):
    ar = p["all-reduce"]
    submit(TeamFactory(name="Fast"), {ar: 2.0})
    submit(TeamFactory(name="Fair"), {ar: 1.2})
    submit(TeamFactory(name="Slow"), {ar: 0.8})
    example(staff_team, {ar: 1.5})
    example(staff_team, {ar: 0.5}, label="Example: examples/symm")
    entries = problem_board(problem=ar, profile="cpu").entries
    shown = [
        (
            e.kind,
            getattr(e.row, "rank", None),
            getattr(e.row, "team_name", None) or getattr(e.row, "label", None),
        )
        for e in entries
    ]
    assert shown == [
        ("team", 1, "Fast"),
        ("example", None, FAST),
        ("team", 2, "Fair"),
        ("baseline", None, None),
        ("team", 3, "Slow"),
        ("example", None, "Example: examples/symm"),
    ]


def test_each_label_is_one_row_with_its_best_results(p, staff_team):
    ar, ag = p["all-reduce"], p["all-gather"]
    example(staff_team, {ar: 1.2, ag: 3.0}, minutes=1)
    example(staff_team, {ar: 2.5, ag: "wrong_answer"}, minutes=2)  # a later, partial rerun
    example(staff_team, {ar: 1.1}, label="Example: examples/symm", minutes=3)
    rows = {r.label: r for r in leaderboard_rows(profile="cpu") if r.is_example}
    assert set(rows) == {FAST, "Example: examples/symm"}
    assert rows[FAST].score.solved == 2 and rows[FAST].score.geomean == pytest.approx(
        (2.5 * 3.0) ** 0.5
    )
    [best] = [r for r in problem_board(problem=ar, profile="cpu").examples if r.label == FAST]
    assert best.speedup == 2.5


def test_a_disqualified_example_is_not_shown(p, staff_team):
    submission = example(staff_team, {p["all-reduce"]: 2.0})
    submission.disqualified_at = submission.finished_at
    submission.save()
    assert not [r for r in leaderboard_rows(profile="cpu") if r.is_example]
    assert problem_board(problem=p["all-reduce"], profile="cpu").examples == []


def test_an_example_never_stands_for_its_teams_best_submission(p, team):
    # A staff account in a competing team: its example and the team's own are apart.
    own = submit(team, {p["all-reduce"]: 1.1})
    shown = example(team, {p["all-reduce"]: 4.0})
    best = problem_best_submissions(problem=p["all-reduce"])
    assert {s.pk for s in best} == {own.pk, shown.pk}
    [row] = problem_ranking(problem=p["all-reduce"], profile="cpu")
    assert row.speedup == 1.1 and row.submission_id == own.pk


def test_the_board_page_labels_the_example_row(client, p, staff_team):
    submit(TeamFactory(name="Ring Masters", slug="ring-masters"), {p["all-reduce"]: 1.5})
    example(staff_team, {p["all-reduce"]: 2.0})
    html = client.get(reverse("leaderboard:home")).content.decode()
    row = html[html.index('<tr class="example"') :]
    row = row[: row.index("</tr>")]
    assert FAST in row and '<span class="badge example">example</span>' in row
    assert '<td class="num rank">–</td>' in row and "/teams/examples/" not in row
    assert html.index(FAST) < html.index("Ring Masters") < html.index(BASELINE_NAME)


def test_the_problem_page_shows_the_examples_time_interval_and_source(client, p, staff_team):
    submission = example(staff_team, {})
    ProblemResultFactory(
        submission=submission,
        problem=p["all-reduce"],
        speedup=1.84,
        speedup_low=1.80,
        speedup_high=1.88,
        time_us=42.0,
    )
    submit(TeamFactory(name="Slowpokes"), {p["all-reduce"]: 0.5})
    html = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    section = html[html.index('id="problem-ranking"') :]
    row = section[section.index('<tr class="example"') :]
    row = row[: row.index("</tr>")]
    assert FAST in row and "42.0 µs" in row and "1.84× (1.80–1.88)" in row
    source = reverse("submissions:bundle", args=[submission.pk])
    assert f'href="{source}"' in row
    assert section.index(FAST) < section.index("baseline") < section.index("Slowpokes")
    # Anyone may read an example's code, signed in or not; the whole bundle.
    response = client.get(source)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == submission.bundle.open("rb").read()
