"""`pkb status` and `pkb leaderboard --problem` show a speedup with its interval."""

from __future__ import annotations

import pytest

from portal.cli import main as cli
from portal.cli.commands import common
from portal.submissions.services import rerun_queue
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import judge_rerun, judged, passed

pytestmark = pytest.mark.django_db(transaction=True)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_status_shows_the_interval(capsys, as_alice, alice, team, problems):
    submission = judged(team=team, user=alice, speedup=1.84, low=1.80, high=1.88)
    code, out = run(capsys, "status", str(submission.pk))
    assert code == 0 and "1.84x (1.80–1.88)" in out


def test_status_of_a_result_without_an_interval_shows_the_speedup_alone(
    capsys, as_alice, alice, team, problems
):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=1.84)
    code, out = run(capsys, "status", str(submission.pk))
    assert code == 0 and "1.84x" in out and "1.84x (" not in out


def test_the_problem_board_shows_the_median_of_the_runs_with_its_interval(
    capsys, site, alice, team, problems
):
    submission = judged(team=team, user=alice, speedup=1.5)
    rerun = rerun_queue(submission=submission, problem=problems["all-reduce"], reason="ranking")
    judge_rerun(rerun, passed(speedup=1.3, low=1.28, high=1.33))
    code, out = run(capsys, "leaderboard", "--problem", "all-reduce")
    # The counted ends: the medians of the two runs' ends.
    assert code == 0 and "1.40x (1.36–1.44)" in out


def test_a_message_with_terminal_escapes_is_printed_as_text(
    capsys, as_alice, alice, team, problems
):
    """Results recorded before the evaluator neutralised them may hold raw escapes."""
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    message = "\x1b[2J\x1b]0;pwned\x07[bold]RuntimeError"
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        status="runtime_error",
        message=message,
    )
    code, out = run(capsys, "status", str(submission.pk))
    assert code == 1 and "\x1b" not in out and "\x07" not in out
    assert "[bold]RuntimeError" in out  # the markup shown as text, not taken as style


def test_the_format_itself():
    assert common.speedup({"speedup": 1.84, "speedup_low": 1.8, "speedup_high": 1.88}) == (
        "1.84x (1.80–1.88)"
    )
    assert common.speedup({"speedup": 1.84, "speedup_low": None, "speedup_high": None}) == "1.84x"
    assert common.speedup({"speedup": 1.84}) == "1.84x"
    assert common.speedup({"speedup": None, "speedup_low": 1.0, "speedup_high": 2.0}) == "—"
