"""Which result counts (issue 23): per team and problem the newest code's, its numbers the
medians over every run of that code; submissions go through the portal's own services, so
their code digests are the real ones."""

from __future__ import annotations

import pytest

from evaluator.contract import ResultFlag
from portal.leaderboard.selectors import leaderboard_rows, problem_board, team_standing
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_start, rerun_queue, submission_create
from tests.portal.bundles import SOLUTION, upload, zip_bundle
from tests.portal.factories import ProblemResultFactory, SubmissionFactory, TeamFactory
from tests.portal.judging import finish, judge_rerun, passed

pytestmark = pytest.mark.django_db

OTHER = "def solution(x):\n    y = x.clone()\n    return y\n"


def submit(user, files: dict[str, str], *results) -> Submission:
    """Upload a bundle as the site does, and the host's report of its results."""
    submission = submission_create(user=user, upload=upload(zip_bundle(files)))
    assert evaluation_start(evaluation_id=str(submission.evaluation_id), host="cpu-1")
    assert finish(submission.evaluation_id, *results)
    submission.refresh_from_db()
    return submission


def counted(problems, slug="all-reduce", team="alices-kernels"):
    ranking = problem_board(problem=problems[slug], profile="cpu").ranking
    return next(row for row in ranking if row.team_slug == team)


def team_row(team):
    return next(r for r in leaderboard_rows(profile="cpu") if r.team_slug == team.slug)


def test_resubmitting_the_same_code_pools_its_runs_by_their_medians(alice, team, problems):
    files = {"all-reduce.py": SOLUTION}
    submit(alice, files, passed(speedup=1.2, low=0.95, high=1.3))
    lucky = submit(alice, files, passed(speedup=1.6, low=1.5, high=1.7))
    submit(alice, files, passed(speedup=1.0, low=0.9, high=1.1))
    row = counted(problems)
    assert (row.speedup, row.speedup_low, row.speedup_high) == (1.2, 0.95, 1.3)
    assert row.run_count == 3 and row.submission_id != lucky.pk
    # The lucky draw alone (its lower end 1.5) would count as faster; the pool does not.
    assert team_row(team).score.faster == 0


def test_a_comment_or_a_reformatting_is_the_same_code(alice, team, problems):
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.4, low=1.3, high=1.5))
    noted = "# now with a comment\n" + SOLUTION.replace("    return", "\n    return")
    submit(alice, {"all-reduce.py": noted}, passed(speedup=1.0, low=0.9, high=1.1))
    row = counted(problems)
    assert row.run_count == 2 and row.speedup == pytest.approx(1.2)


def test_newer_code_replaces_the_pool_even_when_slower(alice, team, problems):
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=2.0, low=1.9, high=2.1))
    newer = submit(alice, {"all-reduce.py": OTHER}, passed(speedup=0.8, low=0.7, high=0.9))
    row = counted(problems)
    assert (row.speedup, row.run_count, row.submission_id) == (0.8, 1, newer.pk)
    standing = team_standing(team=team, profile="cpu")
    assert [(b.slug, b.speedup) for b in standing.best] == [("all-reduce", 0.8)]
    assert [share for _, share in standing.fast_1_history] == [1 / 3, 0.0]


def test_going_back_to_earlier_code_pools_with_its_earlier_runs(alice, team, problems):
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.5, low=1.4, high=1.6))
    submit(alice, {"all-reduce.py": OTHER}, passed(speedup=0.8, low=0.7, high=0.9))
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.3, low=1.2, high=1.4))
    row = counted(problems)
    assert (row.speedup, row.run_count) == (pytest.approx(1.4), 2)


def test_another_problems_solution_does_not_change_the_code(alice, team, problems):
    submit(
        alice,
        {"all-reduce.py": SOLUTION, "all-gather.py": SOLUTION},
        passed(speedup=1.5, low=1.4, high=1.6),
        passed("all-gather", speedup=1.5, low=1.4, high=1.6),
    )
    submit(
        alice,
        {"all-reduce.py": SOLUTION, "all-gather.py": OTHER},
        passed(speedup=1.1, low=1.0, high=1.2),
        passed("all-gather", speedup=1.1, low=1.0, high=1.2),
    )
    assert counted(problems).run_count == 2  # all-reduce's code did not change
    assert counted(problems, "all-gather").run_count == 1  # all-gather's did


def test_re_runs_join_the_pool(alice, team, problems):
    first = submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.2, low=1.1, high=1.3))
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.4, low=1.3, high=1.5))
    rerun = rerun_queue(submission=first, problem=problems["all-reduce"], reason="ranking")
    judge_rerun(rerun, passed(speedup=1.0, low=0.9, high=1.1))
    row = counted(problems)
    assert (row.speedup, row.speedup_low, row.speedup_high) == (1.2, 1.1, 1.3)
    assert row.run_count == 3


def test_a_newer_failure_or_flagged_pass_replaces_nothing(alice, team, problems):
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.5, low=1.4, high=1.6))
    submit(
        alice,
        {"all-reduce.py": OTHER},
        passed(speedup=9.0, low=8.0, high=10.0, flags=[str(ResultFlag.BELOW_FLOOR)]),
    )
    assert (counted(problems).speedup, counted(problems).run_count) == (1.5, 1)


def example(label: str, problem, speedup: float, code: str):
    submission = SubmissionFactory(done=True, example_label=label, problems=[problem.slug])
    ProblemResultFactory(
        submission=submission,
        problem=problem,
        speedup=speedup,
        speedup_low=speedup - 0.1,
        speedup_high=speedup + 0.1,
        code_digest=code,
    )


def test_examples_pool_by_label_whoever_submitted_them(problems):
    example("Example: fast", problems["all-reduce"], 2.0, code="a" * 64)
    example("Example: fast", problems["all-reduce"], 1.0, code="a" * 64)
    example("Example: fast", problems["all-reduce"], 1.6, code="a" * 64)
    example("Example: slow", problems["all-reduce"], 3.0, code="b" * 64)
    example("Example: slow", problems["all-reduce"], 0.5, code="c" * 64)  # newer code
    board = problem_board(problem=problems["all-reduce"], profile="cpu")
    found = {r.label: (r.speedup, r.run_count) for r in board.examples}
    assert found == {"Example: fast": (1.6, 3), "Example: slow": (0.5, 1)}
    rows = {r.label: r for r in leaderboard_rows(profile="cpu") if r.is_example}
    assert rows["Example: fast"].score.faster == 1 and rows["Example: slow"].score.faster == 0
    assert all(r.rank is None for r in rows.values())


def test_other_teams_code_never_pools_with_a_teams(alice, team, problems):
    submit(alice, {"all-reduce.py": SOLUTION}, passed(speedup=1.5, low=1.4, high=1.6))
    other = TeamFactory(name="Copycats")
    submission = SubmissionFactory(team=other, done=True)
    digest = Submission.objects.get(team=team).code_digests["all-reduce"]
    ProblemResultFactory(
        submission=submission, problem=problems["all-reduce"], speedup=0.5, code_digest=digest
    )
    assert counted(problems).run_count == 1
