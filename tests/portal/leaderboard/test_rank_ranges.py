"""Ties shown where they are (issue 23): teams whose scores the speedups' intervals cannot
separate get a rank range, on the board, the team page, the API and in pkb."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from portal.leaderboard.scoring import RULE
from portal.leaderboard.selectors import (
    BASELINE_NAME,
    leaderboard_rows,
    problem_board,
    team_standing,
)
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = pytest.mark.django_db


def result(team, problem, speedup: float, low: float, high: float) -> None:
    submission = SubmissionFactory(team=team, done=True, problems=[problem.slug])
    ProblemResultFactory(
        submission=submission,
        problem=problem,
        speedup=speedup,
        speedup_low=low,
        speedup_high=high,
    )


@pytest.fixture
def close_race(problems):
    """Clear (2x on two problems, tight), then Near and Noisy, whose intervals overlap."""
    clear, near, noisy = (TeamFactory(name=n) for n in ("Clear", "Near", "Noisy"))
    for problem in (problems["all-reduce"], problems["all-gather"]):
        result(clear, problem, 2.0, 1.9, 2.1)
    result(near, problems["all-reduce"], 1.5, 1.3, 1.7)
    result(noisy, problems["all-reduce"], 1.4, 0.9, 1.8)
    return clear, near, noisy


def test_the_board_gives_ranges_only_where_scores_are_not_separable(close_race):
    rows = [r for r in leaderboard_rows(profile="cpu") if not r.is_baseline]
    found = [(r.team_name, r.rank, r.rank_low, r.rank_high, r.rank_range) for r in rows]
    assert found == [
        ("Clear", 1, 1, 1, None),
        ("Near", 2, 2, 3, "2-3"),
        ("Noisy", 3, 2, 3, "2-3"),  # 1.4x, but 0.9 at its lower end: not faster
    ]


def test_the_reference_row_stays_above_a_team_that_is_not_faster_beyond_noise(close_race):
    names = [r.team_name for r in leaderboard_rows(profile="cpu")]
    assert names.index("Noisy") > names.index(BASELINE_NAME) > names.index("Near")


def test_the_page_shows_the_range_and_says_the_rule(client, close_race):
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert html.count(">2-3</span>") == 2
    about = client.get(reverse("leaderboard:scoring")).content.decode()
    assert f'<p id="scoring-rule">{escape(RULE)}</p>' in about


def test_the_team_page_shows_its_range(client, close_race):
    _, near, _ = close_race
    assert team_standing(team=near, profile="cpu").rank_range == "2-3"
    html = client.get(reverse("leaderboard:team", args=[near.slug])).content.decode()
    assert 'id="team-rank-range"' in html and "2-3" in html


def test_the_references_own_code_with_lucky_speedups_stays_under_the_reference_row(problems):
    """Every problem solved, every point speedup over 1.0 by luck, every interval over 1.0:
    the same counts as the reference (fast_1 0, fast_0 1), so the third key decides. On the
    point geomean (1.07) it stood above the reference row; on the lower ends it stays under."""
    lucky = TeamFactory(name="Lucky")
    for slug, speedup in (("all-reduce", 1.04), ("all-gather", 1.10), ("tp-linear", 1.07)):
        result(lucky, problems[slug], speedup, 0.8, 1.3)
    rows = leaderboard_rows(profile="cpu")
    [row] = [r for r in rows if r.team_name == "Lucky"]
    assert (row.score.fast_1, row.score.fast_0) == (0.0, 1.0) and row.score.geomean > 1.0
    names = [r.team_name for r in rows]
    assert names.index(BASELINE_NAME) < names.index("Lucky")


def test_a_problems_table_orders_by_lower_ends_and_shows_ranges(client, problems):
    """Sure (1.2x, 1.1-1.3) above Wide (1.4x, 0.9-1.8); the reference between them, Wide
    not marked faster; the two not separable: "1-2" on both."""
    sure, wide = TeamFactory(name="Sure"), TeamFactory(name="Wide")
    result(wide, problems["all-reduce"], 1.4, 0.9, 1.8)
    result(sure, problems["all-reduce"], 1.2, 1.1, 1.3)
    board = problem_board(problem=problems["all-reduce"], profile="cpu")
    found = [(r.team_name, r.rank, r.rank_range, r.is_faster) for r in board.ranking]
    assert found == [("Sure", 1, "1-2", True), ("Wide", 2, "1-2", False)]
    kinds = [e.row.team_name if e.row else e.kind for e in board.entries]
    assert kinds == ["Sure", "baseline", "Wide"]
    html = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    section = html[html.index('id="problem-ranking"') :]
    assert section.index("Sure") < section.index("baseline") < section.index("Wide")
    assert section.count('class="num strong faster"') == 1
    assert section.count(">1-2</span>") == 2
    api = client.get(
        reverse("api:problem-leaderboard", args=["all-reduce"]) + "?profile=cpu"
    ).json()
    assert [(r["team"], r["rank_range"], r["is_faster"]) for r in api["rows"]] == [
        ("Sure", "1-2", True),
        ("Wide", "1-2", False),
    ]
