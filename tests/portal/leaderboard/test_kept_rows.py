"""Boards built from kept rows (portal/leaderboard/kept.py) equal the straightforward
computation from the results, to the last bit, on a varied dataset and after each kind of
change; and a recorded result computes again its team's rows only."""

from __future__ import annotations

import math
import random
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.leaderboard import kept
from portal.leaderboard.models import KeptRow, StaleMark
from portal.leaderboard.selectors.board import build_kept_leaderboard, build_leaderboard
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult, ResultRun, Submission
from tests.portal.factories import (
    ProblemFactory,
    ProblemResultFactory,
    SubmissionFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(days=2)
PROFILES = ("cpu", "h200x4")


@pytest.fixture
def catalog() -> list[Problem]:
    """Seven published problems in three categories, one weighing 2, one judged on h200x4
    only; and a hidden one."""
    made = [
        ProblemFactory(slug=f"kept-{i}", category=category, weight=2.0 if i == 2 else 1.0)
        for i, category in enumerate(
            [Category.COLLECTIVE] * 3 + [Category.TENSOR] * 2 + [Category.EXPERT] * 2
        )
    ]
    made[6].profiles = ["h200x4"]
    made[6].save()
    ProblemFactory(slug="kept-hidden", status=Problem.Status.HIDDEN)
    return made


def outcome(rng: random.Random) -> dict:
    """A result's numbers: with an interval, without one, untimed, failed or flagged."""
    speedup = math.exp(rng.gauss(0.1, 0.5))
    kind = rng.choice(["interval"] * 5 + ["point", "untimed", "failed", "flagged"])
    if kind == "failed":
        return {"status": ProblemResult.Status.WRONG_ANSWER, "speedup": None}
    if kind == "untimed":
        return {"speedup": None, "time_us": None}
    numbers = {"speedup": speedup, "roofline": rng.choice([None, rng.random()])}
    if kind == "interval":
        spread = math.exp(abs(rng.gauss(0, 0.3)))
        numbers |= {"speedup_low": speedup / spread, "speedup_high": speedup * spread}
    if kind == "flagged":
        numbers["flags"] = [ProblemResult.Flag.BELOW_FLOOR]
    return numbers


def record(team, problems, rng, *, minute: int, profile: str, code: str = "", **kwargs):
    submission = SubmissionFactory(
        team=team,
        done=True,
        profile=profile,
        finished_at=T0 + timedelta(minutes=minute),
        problems=[p.slug for p in problems],
        **kwargs,
    )
    for problem in problems:
        result = ProblemResultFactory(
            submission=submission, problem=problem, code_digest=code, **outcome(rng)
        )
        if result.status == ProblemResult.Status.PASSED and rng.random() < 0.2:
            rerun(result, rng)
    return submission


def rerun(result: ProblemResult, rng: random.Random) -> None:
    """Two judged runs of the result, its numbers their medians' stand-in."""
    for i in range(2):
        numbers = outcome(rng)
        numbers.pop("status", None)
        numbers.pop("flags", None)
        ResultRun.objects.create(
            result=result,
            evaluation_id=uuid.uuid4(),
            judged_at=T0 + timedelta(minutes=i),
            problem_version=result.problem_version,
            status=ProblemResult.Status.PASSED,
            **{k: v for k, v in numbers.items() if k != "time_us"},
        )
    ProblemResult.objects.filter(pk=result.pk).update(run_count=2)


@pytest.fixture
def varied(catalog) -> list:
    """Twenty teams with resubmissions (same code and new), re-runs, ties in time, two
    profiles, a disqualified team and an example."""
    rng = random.Random(46)
    teams = [TeamFactory(name=f"Kept team {i}") for i in range(20)]
    for i, team in enumerate(teams):
        for attempt in range(rng.randint(1, 3)):
            problems = rng.sample(catalog, rng.randint(1, len(catalog)))
            code = rng.choice(["", f"code-{i}", f"code-{i}-{attempt}"])
            profile = rng.choice(PROFILES)
            record(team, problems, rng, minute=rng.randint(0, 30), profile=profile, code=code)
    teams[3].disqualified_at = timezone.now()
    teams[3].save()
    record(teams[0], catalog[:4], rng, minute=5, profile="cpu", example_label="fast-example")
    return teams


def snapshot(board) -> tuple:
    rows = [
        (
            r.team_name,
            r.team_slug,
            r.is_baseline,
            r.is_example,
            r.rank,
            r.rank_low,
            r.rank_high,
            r.score,
            list(r.categories),
            r.reached_at,
            tuple(r.counted),
            r.curve,
        )
        for r in board.rows
    ]
    return board.columns, board.categories_present, board.weighted, rows


def assert_same_boards() -> None:
    for profile in PROFILES:
        for category in [None, *Category.values]:
            for who in ("all", "people", "models"):
                args = {"profile": profile, "category": category, "who": who}
                fast = snapshot(build_kept_leaderboard(**args))
                assert fast == snapshot(build_leaderboard(**args)), args


def test_kept_boards_equal_the_computation_from_results(varied):
    board = build_kept_leaderboard(profile="cpu")
    assert board.teams > 10 and any(r.is_example for r in board.rows)
    assert any(r.rank_range for r in board.rows)  # the data has overlapping intervals
    assert_same_boards()


def test_they_stay_equal_through_every_kind_of_change(varied, catalog):
    rng = random.Random(7)
    build_kept_leaderboard(profile="cpu")
    record(varied[5], catalog[:3], rng, minute=40, profile="cpu", code="code-5")  # same code
    assert_same_boards()
    result = ProblemResult.objects.filter(status=ProblemResult.Status.PASSED).first()
    ProblemResult.objects.filter(pk=result.pk).update(speedup_low=3.0, speedup_high=4.0)
    assert_same_boards()
    varied[7].name = "Renamed"
    varied[7].save()
    varied[8].disqualified_at = timezone.now()
    varied[8].save()
    assert_same_boards()
    submission = Submission.objects.filter(team=varied[9]).first()
    submission.example_label = "now-an-example"
    submission.save()
    Submission.objects.filter(team=varied[10]).first().delete()
    assert_same_boards()
    catalog[0].weight = 3.0
    catalog[0].save()
    catalog[4].version += 1  # its results wait for a re-evaluation
    catalog[4].save()
    catalog[5].status = Problem.Status.RETIRED
    catalog[5].save()
    assert_same_boards()


def test_a_recorded_result_computes_its_team_again_only(varied, catalog):
    kept.refresh()
    before = dict(KeptRow.objects.values_list("id", "team_id"))
    team = varied[11]
    record(team, catalog[:2], random.Random(3), minute=50, profile="cpu")
    assert set(StaleMark.objects.values_list("team_id", "label")) == {(team.pk, "")}
    kept.refresh()
    after = dict(KeptRow.objects.values_list("id", "team_id"))
    assert {i: t for i, t in before.items() if t != team.pk} == {
        i: t for i, t in after.items() if t != team.pk
    }
    assert not StaleMark.objects.exists()
    assert_same_boards()


def test_a_problem_change_marks_every_group(varied, catalog):
    kept.refresh()
    Problem.objects.filter(pk=catalog[1].pk).update(weight=0.5)
    assert (None, "") in set(StaleMark.objects.values_list("team_id", "label"))
    assert_same_boards()
