from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.leaderboard import freshness, kept
from portal.leaderboard.selectors import BASELINE_NAME, leaderboard, leaderboard_rows
from portal.problems.models import Category
from portal.submissions.models import ProblemResult, Submission
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=1)


def submit(
    team, results: dict, *, minutes: int = 0, profile: str = "cpu", code: str = "", **kwargs
):
    """One finished submission of `team` with {problem: speedup or a failing status}.

    `code` names the code of its problems (ProblemResult.code_digest): submissions of the
    same name pool; without one each submission's code is its own."""
    submission = SubmissionFactory(
        team=team,
        done=True,
        profile=profile,
        finished_at=T0 + timedelta(minutes=minutes),
        problems=[p.slug for p in results],
        **kwargs,
    )
    for problem, outcome in results.items():
        if isinstance(outcome, str):
            ProblemResultFactory(
                submission=submission,
                problem=problem,
                status=outcome,
                speedup=None,
                code_digest=code,
            )
        else:
            ProblemResultFactory(
                submission=submission, problem=problem, speedup=outcome, code_digest=code
            )
    return submission


def teams_only(rows) -> list:
    return [r for r in rows if not r.is_baseline]


def table(rows) -> list[tuple]:
    return [
        (
            r.rank,
            r.team_name,
            r.score.solved,
            r.score.faster,
            None if r.score.geomean is None else round(r.score.geomean, 4),
        )
        for r in rows
    ]


@pytest.fixture
def p(problems):
    return problems


def test_teams_rank_by_fast_1_then_fast_0_then_geomean(p):
    a, b, c, d, e = (TeamFactory(name=n) for n in ("A", "B", "C", "D", "E"))
    submit(a, {p["all-reduce"]: 0.5, p["all-gather"]: 0.5, p["tp-linear"]: 0.5})
    submit(b, {p["all-reduce"]: 2.0, p["all-gather"]: 2.0})  # fast_1 2/3, geomean 2.0
    submit(c, {p["all-reduce"]: 4.0, p["all-gather"]: 1.0})  # fast_1 1/3, fast_0 2/3
    submit(d, {p["all-reduce"]: 1.5, p["all-gather"]: 3.0})  # fast_1 2/3, geomean 2.1213
    submit(e, {p["all-reduce"]: 1.2, p["all-gather"]: 0.9, p["tp-linear"]: 0.9})  # 1/3, 3/3
    assert table(leaderboard_rows(profile="cpu")) == [
        (1, "D", 2, 2, 2.1213),
        (2, "B", 2, 2, 2.0),
        (3, "E", 3, 1, 0.9906),
        (4, "C", 2, 1, 2.0),
        (None, BASELINE_NAME, 3, 0, 1.0),
        (5, "A", 3, 0, 0.5),
    ]


def test_a_copy_of_the_reference_ranks_under_the_reference(p):
    copier = TeamFactory(name="Copier")
    submit(copier, {p["all-reduce"]: 0.99, p["all-gather"]: 1.0, p["tp-linear"]: 1.0})
    assert [r.team_name for r in leaderboard_rows(profile="cpu")] == [BASELINE_NAME, "Copier"]


def test_problem_weights_weigh_the_shares(p):
    p["tp-linear"].weight = 3.0
    p["tp-linear"].save()
    heavy, light = TeamFactory(name="Heavy"), TeamFactory(name="Light")
    submit(heavy, {p["tp-linear"]: 1.5})
    submit(light, {p["all-reduce"]: 1.5, p["all-gather"]: 1.5})
    board = leaderboard(profile="cpu")
    assert board.weighted
    rows = {r.team_name: r for r in board.rows}
    assert rows["Heavy"].score.fast_1 == pytest.approx(3 / 5)
    assert rows["Light"].score.fast_1 == pytest.approx(2 / 5)
    assert [r.team_name for r in board.rows] == ["Heavy", "Light", BASELINE_NAME]


def test_rows_carry_fast_2_and_a_fast_p_curve(p):
    submit(TeamFactory(name="A"), {p["all-reduce"]: 2.5, p["all-gather"]: 1.5})
    [row, baseline] = leaderboard_rows(profile="cpu")
    assert row.score.fast_2 == pytest.approx(1 / 3)
    assert row.curve == [(0.0, pytest.approx(2 / 3)), (1.5, pytest.approx(1 / 3)), (2.5, 0.0)]
    assert baseline.curve == [(0.0, 1.0), (1.0, 0.0)]
    assert "<svg" in row.curve_svg and "fast_1 67%" in row.curve_svg


def test_a_teams_newest_passed_result_per_problem_counts_even_when_slower(p):
    # Each factory submission is other code (no digest): the newest pass replaces the
    # older one; a later failure replaces nothing.
    team = TeamFactory(name="A")
    submit(team, {p["all-reduce"]: 1.2, p["all-gather"]: "wrong_answer"}, minutes=1)
    submit(team, {p["all-reduce"]: 0.8, p["all-gather"]: 3.0}, minutes=2)
    submit(team, {p["all-reduce"]: "runtime_error", p["all-gather"]: "timeout"}, minutes=3)
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert (row.score.solved, row.score.faster) == (2, 1)
    assert row.score.geomean == pytest.approx((0.8 * 3.0) ** 0.5)
    assert row.reached_at == T0 + timedelta(minutes=2)


def test_only_passed_results_of_finished_submissions_count(p):
    team = TeamFactory(name="A")
    submit(team, {p["all-reduce"]: "wrong_answer"})
    for status in (Submission.Status.RUNNING, Submission.Status.CANCELLED):
        s = SubmissionFactory(team=team, status=status)
        ProblemResultFactory(submission=s, problem=p["all-gather"], speedup=5.0)
    assert [r.team_name for r in leaderboard_rows(profile="cpu")] == [BASELINE_NAME]


def test_a_tie_goes_to_the_team_that_got_there_first(p):
    late, early = TeamFactory(name="Late"), TeamFactory(name="Early")
    submit(late, {p["all-reduce"]: 2.0}, minutes=10)
    submit(early, {p["all-reduce"]: 1.0}, minutes=1)
    submit(early, {p["all-reduce"]: 2.0}, minutes=5, code="v2")  # its counted code's first
    submit(early, {p["all-reduce"]: 2.0}, minutes=20, code="v2")  # the same code, pooled
    rows = leaderboard_rows(profile="cpu")
    assert [(r.rank, r.team_name) for r in teams_only(rows)] == [(1, "Early"), (2, "Late")]
    assert rows[0].reached_at == T0 + timedelta(minutes=5)


def test_the_baseline_row_solves_everything_at_speedup_one(p):
    [baseline] = leaderboard_rows(profile="cpu")
    assert baseline.is_baseline and baseline.rank is None
    assert (baseline.score.solved, baseline.score.total, baseline.score.geomean) == (3, 3, 1.0)
    assert [(s.solved, s.geomean) for s in baseline.categories] == [(2, 1.0), (1, 1.0)]


def test_a_team_faster_anywhere_ranks_above_the_baseline(p):
    team = TeamFactory(name="A")
    submit(team, {p["all-reduce"]: 2.0, p["all-gather"]: 0.5})
    assert [r.team_name for r in leaderboard_rows(profile="cpu")] == ["A", BASELINE_NAME]


def test_other_profiles_results_are_excluded(p):
    submit(TeamFactory(name="CPU team"), {p["all-reduce"]: 1.0})
    submit(TeamFactory(name="GPU team"), {p["all-reduce"]: 9.0}, profile="h200x4")
    assert [r.team_name for r in teams_only(leaderboard_rows(profile="cpu"))] == ["CPU team"]
    assert [r.team_name for r in teams_only(leaderboard_rows(profile="h200x4"))] == ["GPU team"]


def test_hidden_and_retired_problems_do_not_count(p):
    team = TeamFactory(name="A")
    submit(team, {p["secret-op"]: 5.0, p["old-op"]: 5.0, p["all-reduce"]: 1.0})
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert (row.score.solved, row.score.total, row.score.geomean) == (1, 3, 1.0)


def test_scores_per_category_fill_their_column_groups(p):
    team = TeamFactory(name="A")
    submit(team, {p["all-reduce"]: 2.0, p["tp-linear"]: 0.5})
    board = leaderboard(profile="cpu")
    assert [(c.value, c.label, c.total) for c in board.columns] == [
        ("collective", "Collective primitives", 2),
        ("tensor", "Tensor parallel", 1),
    ]
    [row] = teams_only(board.rows)
    assert [(s.solved, s.faster, s.geomean, s.total) for s in row.categories] == [
        (1, 1, 2.0, 2),
        (1, 0, 0.5, 1),
    ]


def test_a_category_board_ranks_on_that_category_only(p):
    tensor, collective = TeamFactory(name="Tensor"), TeamFactory(name="Collective")
    submit(tensor, {p["tp-linear"]: 1.5})
    submit(collective, {p["all-reduce"]: 3.0, p["all-gather"]: 3.0})
    board = leaderboard(profile="cpu", category=Category.TENSOR)
    assert [c.value for c in board.columns] == ["tensor"]
    assert table(board.rows) == [(1, "Tensor", 1, 1, 1.5), (None, BASELINE_NAME, 1, 0, 1.0)]


def test_passed_without_a_timing_counts_as_solved_but_not_in_the_geomean(p):
    team = TeamFactory(name="A")
    s = submit(team, {p["all-reduce"]: 2.0})
    ProblemResultFactory(submission=s, problem=p["all-gather"], speedup=None)
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert (row.score.solved, row.score.faster, row.score.geomean) == (2, 1, 2.0)


def flagged(team, problem, *, speedup: float, roofline: float = 1.5, minutes: int = 0):
    """A passed result faster than the links allow: kept as evidence, never ranked."""
    submission = SubmissionFactory(
        team=team, done=True, finished_at=T0 + timedelta(minutes=minutes), problems=[problem.slug]
    )
    return ProblemResultFactory(
        submission=submission,
        problem=problem,
        speedup=speedup,
        roofline=roofline,
        flags=[ProblemResult.Flag.BELOW_FLOOR],
    )


def test_a_flagged_pass_does_not_count(p):
    cheat, honest = TeamFactory(name="Cheat"), TeamFactory(name="Honest")
    flagged(cheat, p["all-reduce"], speedup=50.0)
    flagged(cheat, p["all-gather"], speedup=50.0)
    submit(honest, {p["all-reduce"]: 1.1})
    rows = leaderboard_rows(profile="cpu")
    assert [(r.rank, r.team_name) for r in rows] == [(1, "Honest"), (None, BASELINE_NAME)]


def test_a_flagged_pass_does_not_hide_the_teams_real_one(p):
    team = TeamFactory(name="A")
    submit(team, {p["all-reduce"]: 1.2}, minutes=1)
    flagged(team, p["all-reduce"], speedup=40.0, minutes=2)
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert (row.score.solved, row.score.geomean) == (1, 1.2)
    assert row.reached_at == T0 + timedelta(minutes=1)


def test_the_roofline_is_the_mean_over_counted_results_that_have_one(p):
    team = TeamFactory(name="A")
    s = submit(team, {})
    for problem, fraction in (("all-reduce", 0.5), ("all-gather", 0.7), ("tp-linear", None)):
        ProblemResultFactory(submission=s, problem=p[problem], roofline=fraction)
    flagged(team, p["all-gather"], speedup=9.0, roofline=3.0)
    row, baseline = leaderboard_rows(profile="cpu")  # 3 solved at 1.5x: above the baseline
    assert row.roofline == pytest.approx(0.6)
    assert baseline.is_baseline and baseline.roofline is None


def test_the_roofline_is_blank_without_a_measured_bandwidth(p):
    submit(TeamFactory(name="CPU"), {p["all-reduce"]: 1.5, p["all-gather"]: 1.0})
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert row.roofline is None


def test_a_category_boards_roofline_covers_that_category_only(p):
    team = TeamFactory(name="A")
    s = submit(team, {})
    ProblemResultFactory(submission=s, problem=p["all-reduce"], roofline=0.9)
    ProblemResultFactory(submission=s, problem=p["tp-linear"], roofline=0.3)
    [row, _] = leaderboard(profile="cpu", category=Category.TENSOR).rows
    assert row.roofline == pytest.approx(0.3)


@pytest.mark.parametrize("teams", [2, 20])
def test_the_query_count_does_not_grow_with_teams(p, teams, django_assert_num_queries):
    for i in range(teams):
        team = TeamFactory()
        submit(team, {p["all-reduce"]: 1.0 + i, p["tp-linear"]: "wrong_answer"}, minutes=i)
        submit(team, {p["all-gather"]: 0.5, p["all-reduce"]: 0.9}, minutes=i + 1)
        flagged(team, p["tp-linear"], speedup=30.0, minutes=i + 2)
    assert ProblemResult.objects.count() == 5 * teams
    freshness.forget()
    kept.refresh()  # test_query_counts counts a refresh of marked teams
    with django_assert_num_queries(5):  # version, marks, problems, kept rows, model entries
        rows = leaderboard_rows(profile="cpu")
    assert len(rows) == teams + 1
    assert all(r.score.solved == 2 for r in rows if not r.is_baseline)
    with django_assert_num_queries(1):  # memoised: the version only
        assert leaderboard_rows(profile="cpu") == rows


def test_a_problem_limited_to_other_hardware_is_out_of_scope(p):
    p["tp-linear"].profiles = ["h200x4"]
    p["tp-linear"].save()
    submit(TeamFactory(name="A"), {p["all-reduce"]: 2.0})
    [row] = teams_only(leaderboard_rows(profile="cpu"))
    assert (row.score.total, row.score.fast_1) == (2, 0.5)
    assert [c.value for c in leaderboard(profile="cpu").columns] == ["collective"]
    assert leaderboard(profile="h200x4").rows[0].score.total == 3
